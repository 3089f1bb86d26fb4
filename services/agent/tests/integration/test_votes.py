"""``approval_vote`` on the session stream: each vote of a quorum approval once, while the call waits for it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from erpilot_agent.adapters.tables import session_events
from erpilot_agent.service_layer.votes import on_approval_voted
from erpilot_contracts.approval.v1 import ApprovalVotedV1, VoteV1
from erpilot_platform.broker import TransientError

from .test_expiry_warnings import engine, new_call, pending, save  # noqa: F401 (the engine fixture)

pytestmark = pytest.mark.integration


def voted(session_id: str, call, pending_id: str, sub: str, received: int) -> ApprovalVotedV1:
    vote = VoteV1(sub=sub, role="manager", action="approve", at=datetime.now(UTC), comment=f"ok from {sub}")
    return ApprovalVotedV1(pending_id=pending_id, call_id=call.call_id, session_id=session_id, operation_id="op",
                           vote=vote, approvals_required=2, approvals_received=received, status="pending")


async def vote_events(engine, session_id: str) -> list[dict]:  # noqa: F811
    async with engine.connect() as conn:
        rows = await conn.execute(select(session_events.c.data).where(
            session_events.c.session_id == session_id, session_events.c.type == "approval_vote")
            .order_by(session_events.c.seq))
    return [row.data for row in rows]


async def test_each_vote_is_shown_once_while_the_call_waits(engine) -> None:  # noqa: F811
    session_id, call = await new_call(engine)
    pending_id = f"pa_{uuid.uuid4().hex}"
    with pytest.raises(TransientError):  # overtook the call's approval_requested: retried later
        await on_approval_voted(engine, voted(session_id, call, pending_id, "mia", 1))
    call.await_approval(pending(pending_id))
    await save(engine, session_id, call)

    assert await on_approval_voted(engine, voted(session_id, call, pending_id, "mia", 1)) is True
    assert await on_approval_voted(engine, voted(session_id, call, pending_id, "mia", 1)) is False  # redelivered
    assert await on_approval_voted(engine, voted(session_id, call, pending_id, "max", 2)) is True
    shown = await vote_events(engine, session_id)
    assert [(e["sub"], e["approvals_received"], e["approvals_required"], e["comment"]) for e in shown] == [
        ("mia", 1, 2, "ok from mia"), ("max", 2, 2, "ok from max")]
    assert {e["call_id"] for e in shown} == {call.call_id}
    assert await on_approval_voted(engine, voted(session_id, call, "pa_other", "zoe", 1)) is False  # not its approval
