"""``approval_expiring`` on the session stream: once per pending approval, only while the call waits for
exactly that approval; a warning that overtakes the call's own approval is retried, one that arrives
after the decision is dropped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from erpilot_agent.adapters.tables import session_events
from erpilot_agent.domain.tool_calls import PendingApproval, ToolCall
from erpilot_agent.service_layer.expiry_warnings import on_approval_expiring
from erpilot_contracts.approval.v1 import ApprovalExpiringV1
from erpilot_platform.broker import TransientError
from erpilot_platform.testing.previews import preview_json

from .conftest import new_call, save

pytestmark = pytest.mark.integration


def warning(session_id: str, call: ToolCall, pending_id: str) -> ApprovalExpiringV1:
    now = datetime.now(UTC)
    return ApprovalExpiringV1(pending_id=pending_id, call_id=call.call_id, session_id=session_id,
                              operation_id="op", tool=call.tool, expires_at=now + timedelta(minutes=5), warned_at=now)


def pending(pending_id: str) -> PendingApproval:
    return PendingApproval(pending_id=pending_id, fingerprint="sha256:f", expires_at=datetime.now(UTC),
                           preview=preview_json(), approval_url=f"http://x/resume/{pending_id}")


async def expiring_events(engine, session_id: str) -> list[dict]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(session_events.c.data).where(
            session_events.c.session_id == session_id, session_events.c.type == "approval_expiring"))
    return [row.data for row in rows]


async def test_a_waiting_call_is_warned_once(engine, uow):
    session_id, call = await new_call(uow)
    with pytest.raises(TransientError):  # overtook the call's approval_requested: retried later
        await on_approval_expiring(uow, warning(session_id, call, "pa_1"))
    call.await_approval(pending("pa_1"))
    await save(uow, session_id, call)

    assert await on_approval_expiring(uow, warning(session_id, call, "pa_1")) is True
    assert await on_approval_expiring(uow, warning(session_id, call, "pa_1")) is False  # redelivered
    assert [e["pending_id"] for e in await expiring_events(engine, session_id)] == ["pa_1"]
    assert (await expiring_events(engine, session_id))[0]["call_id"] == call.call_id


async def test_no_warning_after_the_decision_or_for_another_version(engine, uow):
    session_id, call = await new_call(uow)
    call.await_approval(pending("pa_old"))
    call.supersede("pa_old", pending("pa_new"), decided_by="mia")
    await save(uow, session_id, call)
    assert await on_approval_expiring(uow, warning(session_id, call, "pa_old")) is False

    call.resolve("pa_new", "rejected", decided_by="mia")
    await save(uow, session_id, call)
    assert await on_approval_expiring(uow, warning(session_id, call, "pa_new")) is False
    assert await expiring_events(engine, session_id) == []
