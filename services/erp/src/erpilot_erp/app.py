"""Composition root of the ERP service."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from erpilot_erp.adapters.ledger import ledger as sql_ledger
from erpilot_erp.entrypoints import nats as nats_entry
from erpilot_erp.service_layer.backoffice import ProductService
from erpilot_erp.service_layer.drafts import DraftService
from erpilot_erp.service_layer.operations import OperationService
from erpilot_erp.service_layer.ports import Ledger
from erpilot_erp.service_layer.reads import ReadTools
from erpilot_erp.service_layer.requesters import Requesters
from erpilot_erp.settings import ErpSettings
from erpilot_platform.broker import create_broker
from erpilot_platform.db import create_engine
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.logs import configure_logging
from erpilot_platform.runtime import ServiceApp, register_ping, run_service, serve

SERVICE = "erp"
MIGRATIONS = Path(__file__).parent / "migrations"


def build(settings: ErpSettings, *, ledger: Ledger | None = None) -> ServiceApp:
    """Compose the ERP: endpoints on a broker, an engine, the outbox relay. Nothing connects yet.

    ``ledger`` replaces the PostgreSQL unit of work every command and read runs on (tests: the memory ledger of
    ``services/erp/tests/fakes.py``). The ERP asks no other service: what it sends on leaves its outbox.
    """
    engine = create_engine(settings.database_url, application_name="erpilot-erp")
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    bus = ServiceBus(broker, SERVICE, settings.retry_policy(), ack_wait=settings.ack_wait_seconds)
    sql = sql_ledger(engine)
    uow = ledger or sql
    requesters = Requesters(settings.assertion_key())
    register_ping(bus, engine)
    nats_entry.register(bus, nats_entry.ErpDeps(
        uow,
        reads=ReadTools(uow, requesters),
        drafts=DraftService(uow, requesters, quote_ttl=timedelta(seconds=settings.quote_ttl_seconds)),
        operations=OperationService(uow, settings.grant_key(), requesters, settings.ledger_key(),
                                    default_stock_check=settings.stock_check),
        products=ProductService(uow),
    ))

    async def relay() -> None:
        await sql.outbox.run(engine, broker)

    return ServiceApp(SERVICE, broker, engine, background=[relay])


def seed_demo_catalog(database_url: str) -> dict[str, int]:
    """Load the demo catalogue into the ledger at ``database_url`` (`erpilot seed`, `erpilot up`): how many rows of
    each kind were new. The ERP's public way in; nothing outside it writes its tables."""
    from erpilot_erp.adapters.seed import load_demo_catalog

    async def run() -> dict[str, int]:
        engine = create_engine(database_url, pool_size=1)
        try:
            return await load_demo_catalog(engine)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def main() -> None:
    settings = ErpSettings()
    configure_logging(SERVICE, settings.log_level)
    run_service(serve(build(settings)))
