"""The ledger is the source of truth of what a person approves: a request is checked against the ERP's
own record of its prepared operation (ARCHITECTURE "Trust boundaries")."""

from __future__ import annotations

from erpilot_approval.domain.approvals import ApprovalError
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.erp.v1 import PreparedRecordV1

# What the request and the ledger's record must agree on, field by field.
AGREED_FIELDS = ("tool", "fingerprint", "arguments", "session_id", "call_id", "requested_by", "preview")


def as_the_ledger_prepared(request: RequestApprovalV1, ledger: PreparedRecordV1 | None) -> RequestApprovalV1:
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
    return request.model_copy(update={"preview": ledger.preview})


def require_prepared(ledger: PreparedRecordV1) -> None:
    """A new approval only for an operation the ledger has not finished (a repeat may come later)."""
    if ledger.status != "prepared":
        raise ApprovalError("invalid_request", 422, f"operation {ledger.operation_id} is already {ledger.status}")
