"""Composition root of the agent service."""

from __future__ import annotations

from pathlib import Path

from erpilot_agent.adapters import tables
from erpilot_agent.adapters.downstream import Downstream
from erpilot_agent.adapters.driver_locks import SqlDriverLocks
from erpilot_agent.adapters.models import Model, build_model, openai_tools
from erpilot_agent.adapters.sql_work import SqlWork
from erpilot_agent.domain.runs import RetryBudget
from erpilot_agent.entrypoints import nats as nats_entry
from erpilot_agent.service_layer.ports import AgentUnitOfWork, CallDownstream, DriverLocks
from erpilot_agent.service_layer.run_tools import PipelineTools
from erpilot_agent.service_layer.runs import RunService, run_resumer
from erpilot_agent.service_layer.tool_calls import ToolCallService, drive_left_calls_forever
from erpilot_agent.settings import AgentSettings
from erpilot_platform import advisory_locks
from erpilot_platform.broker import create_broker
from erpilot_platform.db import create_engine
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.logs import configure_logging
from erpilot_platform.outbox import Outbox
from erpilot_platform.runtime import ServiceApp, register_ping, run_service, serve
from erpilot_platform.uow import UnitOfWork

SERVICE = "agent"
MIGRATIONS = Path(__file__).parent / "migrations"


def build(settings: AgentSettings, *, uow: AgentUnitOfWork | None = None, locks: DriverLocks | None = None,
          downstream: CallDownstream | None = None, model: Model | None = None) -> ServiceApp:
    """Compose the agent: endpoints, tool-call pipeline, model runs, outbox relay and run resumer. Nothing
    connects yet. Substitutes (tests): ``uow`` for the PostgreSQL unit of work (calls, sessions, runs and the
    outbox), ``locks`` for the run drivers' advisory locks, ``downstream`` for the NATS client of the ERP and the
    approval service's policy, ``model`` for the one ``ERPILOT_MODEL`` names."""
    engine = create_engine(settings.database_url, application_name="erpilot-agent")
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    service_bus = ServiceBus(broker, SERVICE, settings.retry_policy(), ack_wait=settings.ack_wait_seconds)
    outbox = Outbox(tables.outbox, lock_key=advisory_locks.AGENT_OUTBOX)
    uow = uow or UnitOfWork(engine, SqlWork, outbox=outbox)
    tool_calls = ToolCallService(uow, downstream or Downstream(broker), public_url=settings.public_url)
    run_service = RunService(
        uow, locks or SqlDriverLocks(engine), PipelineTools(tool_calls),
        model or build_model(settings.model, timeout=settings.model_timeout_seconds,
                             max_retries=settings.model_max_retries),
        tool_specs=openai_tools(), budget_tokens=settings.context_budget_tokens,
        tool_bytes=settings.context_tool_bytes, max_steps=settings.max_steps,
        max_concurrent_runs=settings.max_concurrent_runs,
        retry=RetryBudget(settings.run_max_attempts, settings.run_give_up_seconds))
    tool_calls.on_finished = run_service.on_call_finished
    register_ping(service_bus, engine)
    nats_entry.register(service_bus, nats_entry.AgentDeps(uow, tool_calls, run_service))

    async def relay() -> None:
        await outbox.run(engine, broker)

    async def resumer() -> None:
        await run_resumer(run_service, stale_seconds=settings.resume_runs_after_seconds)

    async def left_calls() -> None:  # no stream redelivers a tool call's request (issue 31)
        await drive_left_calls_forever(tool_calls)

    return ServiceApp(SERVICE, broker, engine, background=[relay, resumer, left_calls])


def main() -> None:
    settings = AgentSettings()
    configure_logging(SERVICE, settings.log_level)
    run_service(serve(build(settings)))
