"""``approval_escalated`` on the session stream (SPEC §10), from the approval service's ``evt.approval.escalated``.

Emitted at most once per pending approval, and only while the call still waits for exactly that approval: an
escalation that arrives after the decision (the events travel through separate consumers) is dropped, never
shown. One that overtakes the call's own ``approval_requested`` is retried later. The same shape as
``expiry_warnings.py``.
"""

from __future__ import annotations

import logging

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.tool_calls import CallState, SessionEvent
from erpilot_agent.service_layer.ports import AgentUnitOfWork, Work
from erpilot_contracts.approval.v1 import ApprovalEscalatedV1
from erpilot_platform.broker import TransientError

log = logging.getLogger(__name__)
EVENT = "approval_escalated"


async def on_approval_escalated(uow: AgentUnitOfWork, evt: ApprovalEscalatedV1) -> bool:
    """Append the escalation to the call's session if it still waits for that approval; True when appended."""
    async def work(w: Work) -> bool:
        record = await w.calls.get(call_key(evt.session_id, evt.call_id), lock=True)
        if record is None:
            log.warning("escalation for unknown call %s ignored", evt.call_id)
            return False
        call = record.call
        waiting = call.state is CallState.AWAITING_APPROVAL and call.pending is not None and (
            call.pending.pending_id == evt.pending_id)
        if not waiting:
            if evt.pending_id not in call.resolutions and call.state in (CallState.RECEIVED, CallState.PREPARING):
                raise TransientError(f"approval {evt.pending_id} of call {evt.call_id} is not known here yet")
            return False  # decided, expired or superseded meanwhile: the escalation no longer matters
        if await w.sessions.shows(evt.session_id, EVENT, pending_id=evt.pending_id):
            return False
        await w.sessions.append(evt.session_id, [SessionEvent(EVENT, {
            "call_id": evt.call_id, "pending_id": evt.pending_id, "escalated_to": evt.escalated_to,
            "required_roles": list(evt.required_roles), "escalated_at": evt.escalated_at.isoformat(),
            "expires_at": evt.expires_at.isoformat()})])
        return True

    return await uow.run(work)
