"""``approval_vote`` on the session stream (SPEC §9), from the approval service's ``evt.approval.voted``.

Only quorum approvals have vote events. A vote is shown once (by pending id and voter, checked under the
call's row lock) while the call waits for that approval. ``evt.approval.resolved`` may overtake the deciding
vote's ``evt.approval.voted`` (separate consumers), so it carries every vote and ``before_resolution`` shows
the missing ones before the call records its ``approval_resolved``; the late ``voted`` then finds the call
no longer waiting (or the vote shown) and adds nothing. One that overtakes ``approval_requested`` is retried.
"""

from __future__ import annotations

import logging

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot_agent.adapters import calls, repository
from erpilot_agent.adapters.tables import session_events
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.tool_calls import CallState
from erpilot_contracts.approval.v1 import ApprovalResolvedV1, ApprovalVotedV1, VoteV1
from erpilot_platform.broker import TransientError

log = logging.getLogger(__name__)
EVENT = "approval_vote"


async def on_approval_voted(engine: AsyncEngine, evt: ApprovalVotedV1) -> bool:
    """Append the vote to the call's session if the call still waits for that approval; True when appended."""
    async with engine.begin() as conn:
        if not await _waiting(conn, evt.session_id, evt.call_id, evt.pending_id):
            return False
        appended = await _show(conn, evt, evt.vote, evt.approvals_required, evt.approvals_received)
    if appended:
        repository.outbox.wake()
    return appended


async def before_resolution(engine: AsyncEngine, evt: ApprovalResolvedV1) -> int:
    """Show every vote the resolution carries that the session does not show yet, oldest first, while the
    call still waits for that approval (call it before recording the resolution); how many were added."""
    if not evt.votes:
        return 0
    added = 0
    async with engine.begin() as conn:
        if not await _waiting(conn, evt.session_id, evt.call_id, evt.pending_id):
            return 0
        approvers: set[str] = set()
        for vote in evt.votes:
            if vote.action == "approve":
                approvers.add(vote.sub)
            added += await _show(conn, evt, vote, evt.approvals_required, len(approvers))
    if added:
        repository.outbox.wake()
    return added


async def _waiting(conn, session_id: str, call_id: str, pending_id: str) -> bool:
    """Lock the call; whether it waits for ``pending_id`` (retry later if it does not know it yet)."""
    row = await repository.get_tool_call(conn, call_key(session_id, call_id), lock=True)
    if row is None:
        log.warning("vote for unknown call %s ignored", call_id)
        return False
    call = calls.to_domain(row)
    if call.state is CallState.AWAITING_APPROVAL and call.pending is not None and (
            call.pending.pending_id == pending_id):
        return True
    if pending_id not in call.resolutions and call.state in (CallState.RECEIVED, CallState.PREPARING):
        raise TransientError(f"approval {pending_id} of call {call_id} is not known here yet")
    return False


async def _show(conn, evt: ApprovalVotedV1 | ApprovalResolvedV1, vote: VoteV1, required: int, received: int) -> bool:
    """Append one ``approval_vote`` unless the session shows this person's vote on this approval already."""
    already = await conn.scalar(select(exists().where(
        session_events.c.session_id == evt.session_id, session_events.c.type == EVENT,
        session_events.c.data["pending_id"].as_string() == evt.pending_id,
        session_events.c.data["sub"].as_string() == vote.sub)))
    if already:
        return False
    await repository.append_event(conn, evt.session_id, EVENT, {
        "call_id": evt.call_id, "pending_id": evt.pending_id, "sub": vote.sub, "role": vote.role,
        "action": vote.action, "at": vote.at.isoformat(), "comment": vote.comment,
        "approvals_required": required, "approvals_received": received})
    return True
