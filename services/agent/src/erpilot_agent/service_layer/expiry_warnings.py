"""``approval_expiring`` on the session stream (SPEC §4/§9), from the approval service's ``evt.approval.expiring``:
once per pending approval, only while the call still waits for it (``waiting_notices.py``).
"""

from __future__ import annotations

from erpilot_agent.service_layer.ports import AgentUnitOfWork
from erpilot_agent.service_layer.waiting_notices import append_while_waiting
from erpilot_contracts.approval.v1 import ApprovalExpiringV1

EVENT = "approval_expiring"


async def on_approval_expiring(uow: AgentUnitOfWork, evt: ApprovalExpiringV1) -> bool:
    """Append the warning to the call's session if it still waits for that approval; True when appended."""
    return await append_while_waiting(uow, EVENT, session_id=evt.session_id, call_id=evt.call_id,
                                      pending_id=evt.pending_id, data={"expires_at": evt.expires_at.isoformat()})
