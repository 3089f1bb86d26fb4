"""``approval_vote`` on the session stream: each vote of a quorum approval once, while the call waits for it,
and every one before the call's ``approval_resolved`` even when the resolution arrives first."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from erpilot_agent.adapters.tables import session_events
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_agent.service_layer.votes import before_resolution, on_approval_voted
from erpilot_contracts.approval.v1 import ApprovalResolvedV1, ApprovalVotedV1, VoteV1
from erpilot_platform.broker import TransientError

from .conftest import new_call, save
from .test_expiry_warnings import pending

pytestmark = pytest.mark.integration


def voted(session_id: str, call, pending_id: str, sub: str, received: int) -> ApprovalVotedV1:
    vote = VoteV1(sub=sub, role="manager", action="approve", at=datetime.now(UTC), comment=f"ok from {sub}")
    return ApprovalVotedV1(pending_id=pending_id, call_id=call.call_id, session_id=session_id, operation_id="op",
                           vote=vote, approvals_required=2, approvals_received=received, status="pending")


async def vote_events(engine, session_id: str) -> list[dict]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(session_events.c.data).where(
            session_events.c.session_id == session_id, session_events.c.type == "approval_vote")
            .order_by(session_events.c.seq))
    return [row.data for row in rows]


async def test_each_vote_is_shown_once_while_the_call_waits(engine, uow) -> None:
    session_id, call = await new_call(uow)
    pending_id = f"pa_{uuid.uuid4().hex}"
    with pytest.raises(TransientError):  # overtook the call's approval_requested: retried later
        await on_approval_voted(uow, voted(session_id, call, pending_id, "mia", 1))
    call.await_approval(pending(pending_id))
    await save(uow, session_id, call)

    assert await on_approval_voted(uow, voted(session_id, call, pending_id, "mia", 1)) is True
    assert await on_approval_voted(uow, voted(session_id, call, pending_id, "mia", 1)) is False  # redelivered
    assert await on_approval_voted(uow, voted(session_id, call, pending_id, "max", 2)) is True
    shown = await vote_events(engine, session_id)
    assert [(e["sub"], e["approvals_received"], e["approvals_required"], e["comment"]) for e in shown] == [
        ("mia", 1, 2, "ok from mia"), ("max", 2, 2, "ok from max")]
    assert {e["call_id"] for e in shown} == {call.call_id}
    other = voted(session_id, call, "pa_other", "zoe", 1)
    assert await on_approval_voted(uow, other) is False  # not its approval


async def test_a_resolution_that_overtakes_the_deciding_vote_shows_every_vote_first(engine, uow) -> None:
    session_id, call = await new_call(uow)
    pending_id = f"pa_{uuid.uuid4().hex}"
    call.await_approval(pending(pending_id))
    await save(uow, session_id, call)
    first, deciding = voted(session_id, call, pending_id, "mia", 1), voted(session_id, call, pending_id, "max", 2)
    assert await on_approval_voted(uow, first) is True
    resolved = ApprovalResolvedV1(pending_id=pending_id, call_id=call.call_id, session_id=session_id,
                                  operation_id="op", status="rejected", decided_by="max", comment="no",
                                  approvals_required=2, votes=[first.vote, deciding.vote])
    service = ToolCallService(uow, downstream=None, public_url="http://test")

    for _ in range(2):  # the resolution first (and redelivered), exactly as the agent's consumer handles it
        await before_resolution(uow, resolved)
        await service.on_approval_resolved(resolved)
    assert await on_approval_voted(uow, deciding) is False  # the deciding vote arrives last: shown already
    assert await on_approval_voted(uow, first) is False

    async with engine.connect() as conn:
        rows = await conn.execute(select(session_events.c.type, session_events.c.data).where(
            session_events.c.session_id == session_id).order_by(session_events.c.seq))
    stream = [(row.type, row.data.get("sub"), row.data.get("approvals_received")) for row in rows
              if row.type in ("approval_vote", "approval_resolved")]
    assert stream == [("approval_vote", "mia", 1), ("approval_vote", "max", 2), ("approval_resolved", None, None)]
