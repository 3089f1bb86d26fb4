"""Mapping between a ``tool_calls`` row and the domain's ToolCall (its ``lifecycle`` JSON holds what has no column)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from erpilot_agent.domain.tool_calls import CallState, PendingApproval, ToolCall


def to_domain(row: Any) -> ToolCall:
    life = row.lifecycle or {}
    pending = life.get("pending")
    return ToolCall(
        call_id=row.call_id, tool=row.tool, arguments=row.arguments, state=CallState(row.status),
        needs_approval=life.get("needs_approval"),
        pending=PendingApproval(
            pending_id=pending["pending_id"], fingerprint=pending["fingerprint"],
            expires_at=datetime.fromisoformat(pending["expires_at"]), preview=pending["preview"],
            approval_url=pending["approval_url"], edited_by=pending.get("edited_by"),
        ) if pending else None,
        resolutions=dict(life.get("resolutions", {})),
        decided_by=life.get("decided_by"), comment=life.get("comment"),
        outcome=row.outcome, result=row.result, error=row.error, reason=life.get("reason"),
    )


def to_columns(call: ToolCall) -> dict[str, Any]:
    pending = call.pending
    return {
        "status": call.state.value,
        "arguments": call.arguments,
        "outcome": call.outcome, "result": call.result, "error": call.error,
        "pending_id": pending.pending_id if pending else None,
        "lifecycle": {
            "needs_approval": call.needs_approval,
            "pending": {
                "pending_id": pending.pending_id, "fingerprint": pending.fingerprint,
                "expires_at": pending.expires_at.isoformat(), "preview": pending.preview,
                "approval_url": pending.approval_url, "edited_by": pending.edited_by,
            } if pending else None,
            "resolutions": call.resolutions, "decided_by": call.decided_by, "comment": call.comment,
            "reason": call.reason,
        },
    }
