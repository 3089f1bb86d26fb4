"""The agent's SQL unit of work on the session's PostgreSQL, as ``app.build`` composes it, and helpers to set up
sessions and calls through it."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from erpilot_agent.adapters import tables
from erpilot_agent.adapters.sql_work import SqlWork
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.tool_calls import ToolCall
from erpilot_agent.service_layer.ports import Work
from erpilot_platform import advisory_locks
from erpilot_platform.db import create_engine
from erpilot_platform.outbox import Outbox
from erpilot_platform.uow import UnitOfWork


@pytest.fixture(scope="module")
async def engine(database_url):
    engine = create_engine(database_url, pool_size=8)
    yield engine
    await engine.dispose()


def sql_uow(engine) -> UnitOfWork:
    """The agent's unit of work on ``engine`` (its own outbox, as the service has)."""
    return UnitOfWork(engine, SqlWork, outbox=Outbox(tables.outbox, lock_key=advisory_locks.AGENT_OUTBOX))


@pytest.fixture
def uow(engine) -> UnitOfWork:
    return sql_uow(engine)


async def new_session(uow, owner: str = "alice") -> str:
    session_id = f"ses_{uuid.uuid4().hex[:20]}"
    await uow.run(lambda unit: unit.sessions.add(session_id, owner, None))
    return session_id


async def new_call(uow, tool: str = "adjust_stock", arguments: dict | None = None) -> tuple[str, ToolCall]:
    """A session of alice's with a write recorded ``preparing`` (its tool_started not appended)."""
    session_id = await new_session(uow)
    call = ToolCall(f"call_{uuid.uuid4().hex}", tool, arguments or {"sku": "SKU-1", "delta": -2, "reason": "count"})
    call.start(needs_approval=True)

    async def work(unit: Work) -> None:
        await unit.calls.add(call_key=call_key(session_id, call.call_id), call_id=call.call_id, session_id=session_id,
                             run_id=None, source="external", request_hash="v1:sha256:x",
                             operation_id=f"op_{uuid.uuid4().hex}", assertion=None, call=call)

    await uow.run(work)
    return session_id, call


async def save(uow, session_id: str, call: ToolCall) -> None:
    """Store the call's state as it is now (no events)."""
    key = call_key(session_id, call.call_id)

    async def work(unit: Work) -> None:
        await unit.calls.get(key, lock=True)
        await unit.calls.save(key, call)

    await uow.run(work)


async def event_types(engine, session_id: str) -> list[str]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(tables.session_events.c.type).where(
            tables.session_events.c.session_id == session_id).order_by(tables.session_events.c.seq))
        return list(rows.scalars())
