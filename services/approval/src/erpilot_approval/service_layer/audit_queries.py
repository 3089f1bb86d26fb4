"""The audit log's readers and the ledger's outcomes it records (``query.approval.audit``, operation_finished)."""

from __future__ import annotations

from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.ports import ApprovalStore, ApprovalUnitOfWork
from erpilot_contracts.approval.v1 import AuditQueryV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import OperationStatusV1


async def record_operation_finished(status: OperationStatusV1, store: ApprovalStore) -> None:
    """The commit outcome (and the grant's consumption) of an approved operation, once per operation."""
    if status.status == "prepared":
        return

    async def work(uow: ApprovalUnitOfWork) -> None:
        # Its own fields are all the audit records of it: its votes are not read.
        approval = await uow.approvals.get_by_operation(status.operation_id, votes=False)
        if approval is not None:  # operations that needed no approval are not the audit log's business
            await audit.operation_finished(uow.audit, status, approval)

    await store.run(work)


async def audit_rows(store: ApprovalStore, query: AuditQueryV1) -> ReplyV1:
    """Admins only: the rows of one approval or operation, or since a time, oldest first."""
    if "admin" not in query.actor.roles:
        return ReplyV1.failure("forbidden", "the audit log is for admins", 403)
    if query.pending_id is None and query.operation_id is None and query.since is None:
        return ReplyV1.failure("invalid_query", "give pending_id, operation_id or since", 422)
    found = await store.read(lambda uow: uow.audit.rows_of(
        pending_id=query.pending_id, operation_id=query.operation_id, since=query.since, limit=query.limit))
    return ReplyV1.success({"items": [row.to_wire() for row in found]})
