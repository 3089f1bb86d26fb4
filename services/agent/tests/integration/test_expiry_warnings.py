"""``approval_expiring`` on the session stream: once per pending approval, only while the call waits for
exactly that approval; a warning that overtakes the call's own approval is retried, one that arrives
after the decision is dropped."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from sqlalchemy import select

from erpilot_agent.adapters import calls, repository
from erpilot_agent.adapters.call_store import SqlCallUnitOfWork
from erpilot_agent.adapters.tables import session_events
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.tool_calls import PendingApproval, ToolCall
from erpilot_agent.service_layer.expiry_warnings import on_approval_expiring
from erpilot_contracts.approval.v1 import ApprovalExpiringV1
from erpilot_platform.broker import TransientError
from erpilot_platform.db import create_engine

pytestmark = pytest.mark.integration
ARGUMENTS = {"sku": "SKU-1", "delta": -2, "reason": "count"}


@pytest.fixture(scope="module")
async def engine(database_url):
    engine = create_engine(database_url, pool_size=2)
    yield engine
    await engine.dispose()


def units(engine):
    """The agent's unit of work on ``engine``, as the service composes it."""
    return partial(SqlCallUnitOfWork, engine)


async def new_call(engine) -> tuple[str, ToolCall]:
    session_id, call = f"ses_{uuid.uuid4().hex[:20]}", ToolCall(f"call_{uuid.uuid4().hex}", "adjust_stock", ARGUMENTS)
    call.start(needs_approval=True)
    async with engine.begin() as conn:
        await repository.create_session(conn, session_id, "alice", None)
        await repository.insert_tool_call(conn, call_key=call_key(session_id, call.call_id), call_id=call.call_id,
                                          session_id=session_id, run_id=None,
                                          source="external", tool=call.tool, request_hash="sha256:x",
                                          operation_id=f"op_{uuid.uuid4().hex}", **calls.to_columns(call))
    return session_id, call


async def save(engine, session_id: str, call: ToolCall) -> None:
    async with engine.begin() as conn:
        await repository.update_tool_call(conn, call_key(session_id, call.call_id), **calls.to_columns(call))


def warning(session_id: str, call: ToolCall, pending_id: str) -> ApprovalExpiringV1:
    now = datetime.now(UTC)
    return ApprovalExpiringV1(pending_id=pending_id, call_id=call.call_id, session_id=session_id,
                              operation_id="op", tool=call.tool, expires_at=now + timedelta(minutes=5), warned_at=now)


def pending(pending_id: str) -> PendingApproval:
    return PendingApproval(pending_id=pending_id, fingerprint="sha256:f", expires_at=datetime.now(UTC),
                           preview={}, approval_url=f"http://x/resume/{pending_id}")


async def expiring_events(engine, session_id: str) -> list[dict]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(session_events.c.data).where(
            session_events.c.session_id == session_id, session_events.c.type == "approval_expiring"))
    return [row.data for row in rows]


async def test_a_waiting_call_is_warned_once(engine):
    session_id, call = await new_call(engine)
    with pytest.raises(TransientError):  # overtook the call's approval_requested: retried later
        await on_approval_expiring(units(engine), warning(session_id, call, "pa_1"))
    call.await_approval(pending("pa_1"))
    await save(engine, session_id, call)

    assert await on_approval_expiring(units(engine), warning(session_id, call, "pa_1")) is True
    assert await on_approval_expiring(units(engine), warning(session_id, call, "pa_1")) is False  # redelivered
    assert [e["pending_id"] for e in await expiring_events(engine, session_id)] == ["pa_1"]
    assert (await expiring_events(engine, session_id))[0]["call_id"] == call.call_id


async def test_no_warning_after_the_decision_or_for_another_version(engine):
    session_id, call = await new_call(engine)
    call.await_approval(pending("pa_old"))
    call.supersede("pa_old", pending("pa_new"), decided_by="mia")
    await save(engine, session_id, call)
    assert await on_approval_expiring(units(engine), warning(session_id, call, "pa_old")) is False

    call.resolve("pa_new", "rejected", decided_by="mia")
    await save(engine, session_id, call)
    assert await on_approval_expiring(units(engine), warning(session_id, call, "pa_new")) is False
    assert await expiring_events(engine, session_id) == []
