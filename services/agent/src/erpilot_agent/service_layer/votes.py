"""``approval_vote`` on the session stream (SPEC §9), from the approval service's ``evt.approval.voted``.

Only quorum approvals (``approvals_required`` > 1) have vote events. A vote is shown once (by pending id
and voter) while the call waits for that approval; the deciding vote may arrive after the call's own
``approval_resolved`` (separate consumers), and is then left out: ``approval_resolved`` names who decided.
One that overtakes the call's ``approval_requested`` is retried later.
"""

from __future__ import annotations

import logging

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot_agent.adapters import calls, repository
from erpilot_agent.adapters.tables import session_events
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.tool_calls import CallState
from erpilot_contracts.approval.v1 import ApprovalVotedV1
from erpilot_platform.broker import TransientError

log = logging.getLogger(__name__)
EVENT = "approval_vote"


async def on_approval_voted(engine: AsyncEngine, evt: ApprovalVotedV1) -> bool:
    """Append the vote to the call's session if the call still waits for that approval; True when appended."""
    async with engine.begin() as conn:
        row = await repository.get_tool_call(conn, call_key(evt.session_id, evt.call_id), lock=True)
        if row is None:
            log.warning("vote for unknown call %s ignored", evt.call_id)
            return False
        call = calls.to_domain(row)
        waiting = call.state is CallState.AWAITING_APPROVAL and call.pending is not None and (
            call.pending.pending_id == evt.pending_id)
        if not waiting:
            if evt.pending_id not in call.resolutions and call.state in (CallState.RECEIVED, CallState.PREPARING):
                raise TransientError(f"approval {evt.pending_id} of call {evt.call_id} is not known here yet")
            return False
        already = await conn.scalar(select(exists().where(
            session_events.c.session_id == evt.session_id, session_events.c.type == EVENT,
            session_events.c.data["pending_id"].as_string() == evt.pending_id,
            session_events.c.data["sub"].as_string() == evt.vote.sub)))
        if already:
            return False
        await repository.append_event(conn, evt.session_id, EVENT, {
            "call_id": evt.call_id, "pending_id": evt.pending_id, "sub": evt.vote.sub, "role": evt.vote.role,
            "action": evt.vote.action, "at": evt.vote.at.isoformat(), "comment": evt.vote.comment,
            "approvals_required": evt.approvals_required, "approvals_received": evt.approvals_received})
    repository.outbox.wake()
    return True
