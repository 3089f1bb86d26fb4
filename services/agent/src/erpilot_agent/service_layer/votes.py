"""``approval_vote`` on the session stream (SPEC §9), from the approval service's ``evt.approval.voted``.

Only quorum approvals have vote events. A vote is shown once (by pending id and voter, checked under the
call's row lock) while the call waits for that approval. ``evt.approval.resolved`` may overtake the deciding
vote's ``evt.approval.voted`` (separate consumers), so it carries every vote and ``before_resolution`` shows
the missing ones before the call records its ``approval_resolved``; the late ``voted`` then finds the call
no longer waiting (or the vote shown) and adds nothing. One that overtakes ``approval_requested`` is retried.
"""

from __future__ import annotations

import logging

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.tool_calls import CallState, SessionEvent
from erpilot_agent.service_layer.ports import AgentUnitOfWork, Work
from erpilot_contracts.approval.v1 import ApprovalResolvedV1, ApprovalVotedV1, VoteV1
from erpilot_platform.broker import TransientError

log = logging.getLogger(__name__)
EVENT = "approval_vote"


async def on_approval_voted(uow: AgentUnitOfWork, evt: ApprovalVotedV1) -> bool:
    """Append the vote to the call's session if the call still waits for that approval; True when appended."""
    async def work(unit: Work) -> bool:
        if not await _waiting(unit, evt.session_id, evt.call_id, evt.pending_id):
            return False
        return await _show(unit, evt, evt.vote, evt.approvals_required, evt.approvals_received)

    return await uow.run(work)


async def before_resolution(uow: AgentUnitOfWork, evt: ApprovalResolvedV1) -> int:
    """Show every vote the resolution carries that the session does not show yet, oldest first, while the
    call still waits for that approval (call it before recording the resolution); how many were added."""
    if not evt.votes:
        return 0

    async def work(unit: Work) -> int:
        if not await _waiting(unit, evt.session_id, evt.call_id, evt.pending_id):
            return 0
        added, approvers = 0, set()
        for vote in evt.votes:
            if vote.action == "approve":
                approvers.add(vote.on_behalf_of or vote.sub)  # one per authority (a delegate's counts for whom)
            added += await _show(unit, evt, vote, evt.approvals_required, len(approvers))
        return added

    return await uow.run(work)


async def _waiting(unit: Work, session_id: str, call_id: str, pending_id: str) -> bool:
    """Lock the call; whether it waits for ``pending_id`` (retry later if it does not know it yet)."""
    record = await unit.calls.get(call_key(session_id, call_id), lock=True)
    if record is None:
        log.warning("vote for unknown call %s ignored", call_id)
        return False
    call = record.call
    if call.state is CallState.AWAITING_APPROVAL and call.pending is not None and (
            call.pending.pending_id == pending_id):
        return True
    if pending_id not in call.resolutions and call.state in (CallState.RECEIVED, CallState.PREPARING):
        raise TransientError(f"approval {pending_id} of call {call_id} is not known here yet")
    return False


async def _show(unit: Work, evt: ApprovalVotedV1 | ApprovalResolvedV1, vote: VoteV1, required: int,
                received: int) -> bool:
    """Append one ``approval_vote`` unless the session shows this person's vote on this approval already."""
    if await unit.sessions.shows(evt.session_id, EVENT, pending_id=evt.pending_id, sub=vote.sub):
        return False
    await unit.sessions.append(evt.session_id, [SessionEvent(EVENT, {
        "call_id": evt.call_id, "pending_id": evt.pending_id, "sub": vote.sub, "role": vote.role,
        "action": vote.action, "at": vote.at.isoformat(), "comment": vote.comment,
        "approvals_required": required, "approvals_received": received,
        **({"on_behalf_of": vote.on_behalf_of} if vote.on_behalf_of else {})})])
    return True
