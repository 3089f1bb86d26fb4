"""``approval_escalated`` on the session stream (SPEC §10), from the approval service's ``evt.approval.escalated``:
once per pending approval, only while the call still waits for it (``waiting_notices.py``).
"""

from __future__ import annotations

from erpilot_agent.service_layer.ports import AgentUnitOfWork
from erpilot_agent.service_layer.waiting_notices import append_while_waiting
from erpilot_contracts.approval.v1 import ApprovalEscalatedV1

EVENT = "approval_escalated"


async def on_approval_escalated(uow: AgentUnitOfWork, evt: ApprovalEscalatedV1) -> bool:
    """Append the escalation to the call's session if it still waits for that approval; True when appended."""
    return await append_while_waiting(uow, EVENT, session_id=evt.session_id, call_id=evt.call_id,
                                      pending_id=evt.pending_id, data={
                                          "escalated_to": evt.escalated_to,
                                          "required_roles": list(evt.required_roles),
                                          "escalated_at": evt.escalated_at.isoformat(),
                                          "expires_at": evt.expires_at.isoformat()})
