"""The ledger is the source of truth of what a person approves: a request is checked against the ERP's
own record of its prepared operation (ARCHITECTURE "Trust boundaries")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from erpilot_approval.domain.approvals import ApprovalError, ApprovalRequest

# What the request and the ledger's record must agree on, field by field.
AGREED_FIELDS = ("tool", "fingerprint", "arguments", "session_id", "call_id", "requested_by", "preview")


@dataclass(frozen=True)
class LedgerRecord:
    """The ERP's record of a prepared operation, as it stored it at prepare (``query.erp.prepared``)."""

    operation_id: str
    tool: str
    session_id: str
    call_id: str
    requested_by: str
    arguments: dict[str, Any]
    fingerprint: str
    preview: dict[str, Any]
    status: str  # prepared | committed | rejected


def as_the_ledger_prepared(request: ApprovalRequest, ledger: LedgerRecord | None) -> ApprovalRequest:
    """The request, checked field by field against the ERP's own record of its operation.

    What a person sees (the preview) and every amount rule come from the ledger, never from the sender
    of the request (the agent, the least trusted service): any difference is ``invalid_request``.
    """
    if ledger is None:
        raise ApprovalError("invalid_request", 422, f"the ERP never prepared operation {request.operation_id}")
    for name in AGREED_FIELDS:
        if getattr(request, name) != getattr(ledger, name):
            raise ApprovalError("invalid_request", 422,
                                f"{name} differs from the ERP's prepared operation {request.operation_id}")
    return replace(request, preview=ledger.preview)


def require_prepared(ledger: LedgerRecord) -> None:
    """A new approval only for an operation the ledger has not finished (a repeat may come later)."""
    if ledger.status != "prepared":
        raise ApprovalError("invalid_request", 422, f"operation {ledger.operation_id} is already {ledger.status}")
