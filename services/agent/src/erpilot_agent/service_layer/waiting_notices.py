"""A notice about a pending approval on the session stream (``approval_expiring``, ``approval_escalated``).

Each is emitted at most once per pending approval, and only while the call still waits for exactly that
approval: a notice that arrives after the decision (the events travel through separate consumers) is dropped,
never shown. One that overtakes the call's own ``approval_requested`` is retried later (``TransientError``).
"""

from __future__ import annotations

import logging
from typing import Any

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.tool_calls import CallState, SessionEvent
from erpilot_agent.service_layer.ports import AgentUnitOfWork, Work
from erpilot_platform.broker import TransientError

log = logging.getLogger(__name__)


async def append_while_waiting(uow: AgentUnitOfWork, event: str, *, session_id: str, call_id: str,
                               pending_id: str, data: dict[str, Any]) -> bool:
    """Append ``event`` (with ``call_id``, ``pending_id`` and ``data``) to the call's session if the call still
    waits for that approval and the session does not show it yet; True when appended."""
    async def work(unit: Work) -> bool:
        # Calls are keyed by (session, call_id): a call_id is unique per session only.
        record = await unit.calls.get(call_key(session_id, call_id), lock=True)
        if record is None:
            log.warning("%s for unknown call %s ignored", event, call_id)
            return False
        call = record.call
        waiting = call.state is CallState.AWAITING_APPROVAL and call.pending is not None and (
            call.pending.pending_id == pending_id)
        if not waiting:
            if pending_id not in call.resolutions and call.state in (CallState.RECEIVED, CallState.PREPARING):
                raise TransientError(f"approval {pending_id} of call {call_id} is not known here yet")
            return False  # decided, expired or superseded meanwhile: the notice would be false
        if await unit.sessions.shows(session_id, event, pending_id=pending_id):
            return False
        await unit.sessions.append(session_id, [SessionEvent(event, {
            "call_id": call_id, "pending_id": pending_id, **data})])
        return True

    return await uow.run(work)
