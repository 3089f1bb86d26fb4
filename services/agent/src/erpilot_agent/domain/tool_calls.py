"""The lifecycle of one tool call as a state machine whose transitions return the session events to emit.

    received -> running                                   (no approval: read/draft tools)
    received -> preparing -> awaiting_approval            (approval required: write tools; the ERP asks
                                                           for the approval, the agent hears of it)
    awaiting_approval -> awaiting_approval                (edit: superseded + new approval_pending)
    awaiting_approval -> executing -> finished            (approved: approval_resolved and tool_executing
                                                           together; the approval service sends the commit,
                                                           the ERP's outcome finishes the call)
    awaiting_approval -> finished(not_executed)           (rejected | cancelled | expired | withdrawn)
    running | preparing | executing -> finished           (succeeded | business_rejected | failed;
                                                           preparing may also end not_executed)

Every method is idempotent: repeating a transition that already happened (a redelivered message)
changes nothing and returns no events. A transition that contradicts the recorded one raises
IllegalTransition. The caller persists the fields and emits the events in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from erpilot_contracts.tools.v1 import ToolKind, get_tool


class CallState(StrEnum):
    RECEIVED = "received"
    RUNNING = "running"
    PREPARING = "preparing"
    AWAITING_APPROVAL = "awaiting_approval"
    EXECUTING = "executing"
    FINISHED = "finished"


# The public ToolCallStatus of the contracts has no "preparing".
_VIEW_STATUS = {CallState.PREPARING: "running"}
_NOT_EXECUTED = frozenset({"rejected", "cancelled", "expired", "withdrawn"})
_FINISH_FROM = {
    CallState.RUNNING: {"succeeded", "business_rejected", "failed"},
    CallState.PREPARING: {"business_rejected", "failed", "not_executed"},
    CallState.EXECUTING: {"succeeded", "business_rejected", "failed"},
}


class IllegalTransition(Exception):
    """The transition contradicts the call's recorded state."""


@dataclass(frozen=True)
class SessionEvent:
    """A SPEC §4 event before it gets its seq, session_id and occurred_at."""

    type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class PendingApproval:
    """A pending approval as the approval service stored it."""

    pending_id: str
    fingerprint: str
    expires_at: datetime
    preview: dict[str, Any]
    approval_url: str
    edited_by: str | None = None  # the person whose edit made this version (None: the requester's own)


@dataclass
class ToolCall:
    """One tool call and everything decided about it so far."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    state: CallState = CallState.RECEIVED
    needs_approval: bool | None = None
    pending: PendingApproval | None = None
    resolutions: dict[str, str] = field(default_factory=dict)  # pending_id -> approval status
    decided_by: str | None = None
    comment: str | None = None
    outcome: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    reason: str | None = None  # a write's: why, in the agent's words (passed to the approver, decides nothing)

    @property
    def view_status(self) -> str:
        """The status as ToolCallViewV1 names it."""
        return _VIEW_STATUS.get(self.state, self.state.value)

    @property
    def awaits_decision(self) -> bool:
        """No decision on the call is recorded yet: an outcome of its operation is early (the ERP's
        ``operation_finished`` overtook ``evt.approval.resolved``, which travels through another consumer)."""
        return self.state in (CallState.RECEIVED, CallState.PREPARING, CallState.AWAITING_APPROVAL)

    def _event(self, event_type: str, **data: Any) -> SessionEvent:
        return SessionEvent(event_type, {"call_id": self.call_id, **data})

    def _illegal(self, action: str) -> IllegalTransition:
        return IllegalTransition(f"call {self.call_id}: cannot {action} in state {self.state}")

    def start(self, *, needs_approval: bool | None = None) -> list[SessionEvent]:
        """Begin the call; approval is needed for write tools unless the policy says otherwise."""
        if self.state != CallState.RECEIVED:
            if needs_approval is not None and needs_approval != self.needs_approval:
                raise self._illegal("restart with another approval requirement")
            return []
        if needs_approval is None:
            needs_approval = get_tool(self.tool).kind == ToolKind.WRITE
        self.needs_approval = needs_approval
        self.state = CallState.PREPARING if needs_approval else CallState.RUNNING
        return [self._event("tool_started", tool=self.tool, arguments=self.arguments)]

    def _pending_event(self, pending: PendingApproval) -> SessionEvent:
        edited = {"edited_by": pending.edited_by} if pending.edited_by else {}
        return self._event("approval_pending", pending_id=pending.pending_id, fingerprint=pending.fingerprint,
                           expires_at=pending.expires_at.isoformat(), preview=pending.preview,
                           approval_url=pending.approval_url, **edited)

    def _knows(self, pending_id: str) -> bool:
        current = self.pending.pending_id if self.pending is not None else None
        return pending_id in self.resolutions or pending_id == current

    def await_approval(self, pending: PendingApproval) -> list[SessionEvent]:
        """The operation is prepared and its approval is pending."""
        if self._knows(pending.pending_id):
            return []
        if self.state != CallState.PREPARING:
            raise self._illegal("await approval")
        self.pending = pending
        self.state = CallState.AWAITING_APPROVAL
        return [self._pending_event(pending)]

    def _check_current(self, pending_id: str, action: str) -> None:
        current = self.pending.pending_id if self.pending is not None else None
        if self.state != CallState.AWAITING_APPROVAL or current != pending_id:
            raise self._illegal(f"{action} {pending_id}")

    def resolve(self, pending_id: str, status: str, *, decided_by: str | None,
                comment: str | None = None, on_behalf_of: str | None = None) -> list[SessionEvent]:
        """Record the decision on the current pending approval (not superseded: see ``supersede``);
        ``on_behalf_of``: the delegator a delegate decided for (shown as "decided by Ana for Bob")."""
        if pending_id in self.resolutions:
            recorded = self.resolutions[pending_id]
            if recorded != status:
                raise self._illegal(f"resolve {pending_id} as {status}, it was {recorded}")
            return []
        if status not in _NOT_EXECUTED | {"approved"}:
            # "superseded" needs the new version of the approval: see supersede().
            raise ValueError(f"cannot resolve {pending_id} as {status!r} here")
        self._check_current(pending_id, "resolve")
        self.resolutions[pending_id] = status
        self.decided_by, self.comment = decided_by, comment
        extra = {"comment": comment} if comment else {}
        extra |= {"decided_on_behalf_of": on_behalf_of} if on_behalf_of else {}
        if status == "withdrawn":  # SPEC §9: the owner cancelled the run; the approval is gone, not decided
            resolved = self._event("approval_withdrawn", pending_id=pending_id, withdrawn_by=decided_by)
        else:
            resolved = self._event("approval_resolved", pending_id=pending_id, status=status,
                                   decided_by=decided_by, **extra)
        if status == "approved":
            # Nothing is left for the agent to do: the commit leaves the approval service with the decision.
            self.state = CallState.EXECUTING
            return [resolved, self._event("tool_executing")]
        message = f"approval {status}" + (f": {comment}" if comment else "")
        return [resolved, *self._finish("not_executed", None, {"code": status, "message": message})]

    def supersede(self, old_pending_id: str, new: PendingApproval, *,
                  decided_by: str | None) -> list[SessionEvent]:
        """An edit replaced the pending approval by a new version for the same call."""
        if self.resolutions.get(old_pending_id) == "superseded" and self._knows(new.pending_id):
            return []
        self._check_current(old_pending_id, "supersede")
        if self._knows(new.pending_id):
            raise self._illegal(f"supersede with the known approval {new.pending_id}")
        self.resolutions[old_pending_id] = "superseded"
        self.pending = new
        resolved = self._event("approval_resolved", pending_id=old_pending_id, status="superseded",
                               decided_by=decided_by)
        return [resolved, self._pending_event(new)]

    def finish(self, outcome: str, *, result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None) -> list[SessionEvent]:
        """The call ended with ``result`` (succeeded) or ``error`` {code, message} (any other outcome)."""
        succeeded = outcome == "succeeded"
        if succeeded != (result is not None) or succeeded == (error is not None):
            raise ValueError("succeeded takes a result, every other outcome an error")
        if self.state == CallState.FINISHED:
            if (self.outcome, self.result, self.error) != (outcome, result, error):
                raise self._illegal(f"finish again as {outcome}")
            return []
        if outcome not in _FINISH_FROM.get(self.state, set()):
            raise self._illegal(f"finish as {outcome}")
        return self._finish(outcome, result, error)

    def _finish(self, outcome: str, result: dict[str, Any] | None,
                error: dict[str, Any] | None) -> list[SessionEvent]:
        self.state, self.outcome, self.result, self.error = CallState.FINISHED, outcome, result, error
        detail = {"result": result} if result is not None else {"error": error}
        return [self._event("tool_finished", outcome=outcome, **detail)]

    def model_content(self) -> dict[str, Any] | None:
        """The tool result given to the model, or None while there is nothing to tell it."""
        if self.state == CallState.AWAITING_APPROVAL and self.pending is not None:
            pending = self.pending
            return {"status": "awaiting_approval", "pending_id": pending.pending_id,
                    "expires_at": pending.expires_at.isoformat(), "approval_url": pending.approval_url}
        if self.state != CallState.FINISHED:
            return None
        if self.outcome == "succeeded":
            return {"status": "succeeded", "result": self.result}
        if self.outcome == "not_executed":
            content = {"status": "not_executed", "reason": (self.error or {}).get("code")}
            if self.comment:
                content["comment"] = self.comment
            return content
        return {"status": self.outcome, "error": self.error}
