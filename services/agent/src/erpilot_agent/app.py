"""Composition root of the agent service."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from erpilot_agent.adapters import repository
from erpilot_agent.adapters.downstream import Downstream
from erpilot_agent.entrypoints import nats as nats_entry
from erpilot_agent.service_layer.reconciler import run_reconciler
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_agent.settings import AgentSettings
from erpilot_platform.broker import ServiceBus, create_broker
from erpilot_platform.db import create_engine
from erpilot_platform.logs import configure_logging
from erpilot_platform.runtime import ServiceApp, register_ping, serve

SERVICE = "agent"
MIGRATIONS = Path(__file__).parent / "migrations"


def build(settings: AgentSettings) -> ServiceApp:
    """Compose the agent: endpoints, tool-call pipeline, outbox relay and reconciler. Nothing connects yet."""
    engine = create_engine(settings.database_url, application_name="erpilot-agent")
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    bus = ServiceBus(broker, SERVICE)
    tool_calls = ToolCallService(engine, Downstream(broker), public_url=settings.public_url)
    register_ping(bus, engine)
    nats_entry.register(bus, engine, tool_calls)

    async def relay() -> None:
        await repository.outbox.run(engine, broker)

    async def reconciler() -> None:
        await run_reconciler(tool_calls, older_than=timedelta(seconds=settings.reconcile_after_seconds))

    return ServiceApp(SERVICE, broker, engine, background=[relay, reconciler])


def main() -> None:
    settings = AgentSettings()
    configure_logging(SERVICE, settings.log_level)
    asyncio.run(serve(build(settings)))
