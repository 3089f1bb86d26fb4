"""Composition root of the agent service."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from pathlib import Path

from erpilot_agent.adapters import repository
from erpilot_agent.adapters.call_store import SqlCallUnitOfWork
from erpilot_agent.adapters.downstream import Downstream
from erpilot_agent.adapters.models import Model, build_model, openai_tools
from erpilot_agent.adapters.runs import SqlRunStore
from erpilot_agent.domain.runs import RetryBudget
from erpilot_agent.entrypoints import nats as nats_entry
from erpilot_agent.service_layer.call_ports import CallDownstream, UnitOfWorkFactory
from erpilot_agent.service_layer.reconciler import run_reconciler
from erpilot_agent.service_layer.run_ports import RunStore
from erpilot_agent.service_layer.run_tools import PipelineTools
from erpilot_agent.service_layer.runs import RunService, run_resumer
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_agent.settings import AgentSettings
from erpilot_platform.broker import create_broker
from erpilot_platform.db import create_engine
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.logs import configure_logging
from erpilot_platform.runtime import ServiceApp, register_ping, run_service, serve

SERVICE = "agent"
MIGRATIONS = Path(__file__).parent / "migrations"


def build(settings: AgentSettings, *, uow_factory: UnitOfWorkFactory | None = None, runs: RunStore | None = None,
          bus: CallDownstream | None = None, model: Model | None = None) -> ServiceApp:
    """Compose the agent: endpoints, tool-call pipeline, model runs, outbox relay, reconciler and run
    resumer. Nothing connects yet. Substitutes (tests): ``uow_factory`` for the PostgreSQL tool-call units of
    work (``adapters.memory_calls``), ``runs`` for the run store, ``bus`` for the NATS client of the ERP and
    the approval service, ``model`` for the one ``ERPILOT_MODEL`` names."""
    engine = create_engine(settings.database_url, application_name="erpilot-agent")
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    service_bus = ServiceBus(broker, SERVICE, settings.retry_policy(), ack_wait=settings.ack_wait_seconds)
    tool_calls = ToolCallService(uow_factory or partial(SqlCallUnitOfWork, engine), bus or Downstream(broker),
                                 public_url=settings.public_url)
    run_service = RunService(
        runs or SqlRunStore(engine), PipelineTools(tool_calls),
        model or build_model(settings.model, timeout=settings.model_timeout_seconds,
                             max_retries=settings.model_max_retries),
        tool_specs=openai_tools(), budget_tokens=settings.context_budget_tokens,
        tool_bytes=settings.context_tool_bytes, max_steps=settings.max_steps,
        max_concurrent_runs=settings.max_concurrent_runs,
        retry=RetryBudget(settings.run_max_attempts, settings.run_give_up_seconds))
    tool_calls.on_finished = run_service.on_call_finished
    register_ping(service_bus, engine)
    nats_entry.register(service_bus, tool_calls, run_service)

    async def relay() -> None:
        await repository.outbox.run(engine, broker)

    # Both look at rows only this process's commits (or a dead replica) leave behind: woken with the relay.
    async def reconciler() -> None:
        await run_reconciler(tool_calls, older_than=timedelta(seconds=settings.reconcile_after_seconds),
                             wake=repository.outbox.watch())

    async def resumer() -> None:
        await run_resumer(run_service, stale_seconds=settings.resume_runs_after_seconds)

    return ServiceApp(SERVICE, broker, engine, background=[relay, reconciler, resumer])


def main() -> None:
    settings = AgentSettings()
    configure_logging(SERVICE, settings.log_level)
    run_service(serve(build(settings)))
