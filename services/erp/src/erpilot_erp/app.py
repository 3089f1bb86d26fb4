"""Composition root of the ERP service."""

from __future__ import annotations

import asyncio
from pathlib import Path

from erpilot_erp.adapters import tables
from erpilot_erp.entrypoints import nats as nats_entry
from erpilot_erp.settings import ErpSettings
from erpilot_platform.broker import ServiceBus, create_broker
from erpilot_platform.db import create_engine
from erpilot_platform.logs import configure_logging
from erpilot_platform.outbox import Outbox
from erpilot_platform.runtime import ServiceApp, register_ping, serve

SERVICE = "erp"
MIGRATIONS = Path(__file__).parent / "migrations"
OUTBOX_LOCK_KEY = 7_311_990_101


def build(settings: ErpSettings) -> ServiceApp:
    """Compose the ERP: endpoints on a broker, an engine, the outbox relay. Nothing connects yet."""
    engine = create_engine(settings.database_url, application_name="erpilot-erp")
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    bus = ServiceBus(broker, SERVICE)
    outbox = Outbox(tables.outbox, lock_key=OUTBOX_LOCK_KEY)
    register_ping(bus, engine)
    nats_entry.register(bus, engine)

    async def relay() -> None:
        await outbox.run(engine, broker)

    return ServiceApp(SERVICE, broker, engine, background=[relay])


def main() -> None:
    settings = ErpSettings()
    configure_logging(SERVICE, settings.log_level)
    asyncio.run(serve(build(settings)))
