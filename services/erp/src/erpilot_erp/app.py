"""Composition root of the ERP service."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from erpilot_erp.adapters import tables
from erpilot_erp.adapters.ledger import SqlLedger
from erpilot_erp.adapters.reads import SqlLedgerReads
from erpilot_erp.entrypoints import nats as nats_entry
from erpilot_erp.service_layer.backoffice import ProductService
from erpilot_erp.service_layer.drafts import DraftService
from erpilot_erp.service_layer.operations import OperationService
from erpilot_erp.service_layer.ports import Ledger, LedgerReads
from erpilot_erp.settings import ErpSettings
from erpilot_platform import advisory_locks
from erpilot_platform.broker import create_broker
from erpilot_platform.db import create_engine
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.grants import GRANT_KEYS_HINT, ensure_keypair, load_verify_key
from erpilot_platform.inbox import Inbox
from erpilot_platform.logs import configure_logging
from erpilot_platform.outbox import Outbox
from erpilot_platform.runtime import ServiceApp, register_ping, run_service, serve
from erpilot_platform.settings import ConfigurationError

SERVICE = "erp"
MIGRATIONS = Path(__file__).parent / "migrations"


def grant_verify_key(settings: ErpSettings) -> Ed25519PublicKey:
    """ERPILOT_GRANT_VERIFY_KEY; only in dev mode, else the public half of the key pair under ERPILOT_DATA_DIR."""
    if settings.grant_verify_key:
        try:
            return load_verify_key(settings.grant_verify_key)
        except ValueError as exc:
            raise ConfigurationError(f"ERPILOT_GRANT_VERIFY_KEY: {exc}") from None
    if not settings.dev_mode:
        raise ConfigurationError(f"ERPILOT_GRANT_VERIFY_KEY is not set; {GRANT_KEYS_HINT}")
    return ensure_keypair(Path(settings.data_dir))[1]


def build(settings: ErpSettings, *, uow_factory: Ledger | None = None, reads: LedgerReads | None = None
          ) -> ServiceApp:
    """Compose the ERP: endpoints on a broker, an engine, the outbox relay. Nothing connects yet.

    ``uow_factory`` replaces the PostgreSQL ledger the commands run their units of work on, ``reads`` the
    read side (tests: ``adapters.memory_ledger``). The ERP asks no other service, so there is no ``bus``.
    """
    engine = create_engine(settings.database_url, application_name="erpilot-erp")
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    bus = ServiceBus(broker, SERVICE, settings.retry_policy(), ack_wait=settings.ack_wait_seconds)
    outbox = Outbox(tables.outbox, lock_key=advisory_locks.ERP_OUTBOX)
    ledger = uow_factory or SqlLedger(engine, Inbox(tables.inbox), outbox)
    register_ping(bus, engine)
    nats_entry.register(
        bus, reads or SqlLedgerReads(engine),
        drafts=DraftService(ledger, quote_ttl=timedelta(seconds=settings.quote_ttl_seconds)),
        operations=OperationService(ledger, grant_verify_key(settings), default_stock_check=settings.stock_check),
        products=ProductService(ledger),
    )

    async def relay() -> None:
        await outbox.run(engine, broker)

    return ServiceApp(SERVICE, broker, engine, background=[relay])


def main() -> None:
    settings = ErpSettings()
    configure_logging(SERVICE, settings.log_level)
    run_service(serve(build(settings)))
