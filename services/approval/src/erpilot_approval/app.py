"""Composition root of the approval service."""

from __future__ import annotations

import asyncio
from pathlib import Path

from erpilot_approval.adapters import tables
from erpilot_approval.entrypoints import nats as nats_entry
from erpilot_approval.settings import ApprovalSettings
from erpilot_platform.broker import ServiceBus, create_broker
from erpilot_platform.db import create_engine
from erpilot_platform.logs import configure_logging
from erpilot_platform.outbox import Outbox
from erpilot_platform.runtime import ServiceApp, register_ping, serve

SERVICE = "approval"
MIGRATIONS = Path(__file__).parent / "migrations"
OUTBOX_LOCK_KEY = 7_311_990_201


def build(settings: ApprovalSettings) -> ServiceApp:
    """Compose the approval service. Nothing connects yet; a malformed policy stops here."""
    policy = settings.load_policy()
    engine = create_engine(settings.database_url, application_name="erpilot-approval")
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    bus = ServiceBus(broker, SERVICE)
    outbox = Outbox(tables.outbox, lock_key=OUTBOX_LOCK_KEY)
    register_ping(bus, engine)
    nats_entry.register(bus, engine, policy)

    async def relay() -> None:
        await outbox.run(engine, broker)

    return ServiceApp(SERVICE, broker, engine, background=[relay])


def main() -> None:
    settings = ApprovalSettings()
    configure_logging(SERVICE, settings.log_level)
    asyncio.run(serve(build(settings)))
