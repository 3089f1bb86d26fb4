"""The audit log's readers and the ledger's outcomes it records (``query.approval.audit``,
``query.approval.audit_chain``, operation_finished)."""

from __future__ import annotations

from erpilot_approval.domain.audit import AuditRow, Checkpoint
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Ports, Work
from erpilot_contracts.approval.v1 import (
    AuditChainPageV1,
    AuditChainQueryV1,
    AuditCheckpointV1,
    AuditPageV1,
    AuditQueryV1,
    AuditRowV1,
)
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_platform.refusals import Refused


async def record_operation_finished(status: OperationStatusV1, uow: ApprovalUnitOfWork) -> None:
    """The commit outcome (and the grant's consumption) of an approved operation, once per operation."""
    if status.status == "prepared":
        return

    async def work(unit: Work) -> None:
        # Its own fields are all the audit records of it: its votes are not read.
        approval = await unit.approvals.get_by_operation(status.operation_id, votes=False)
        if approval is not None:  # operations that needed no approval are not the audit log's business
            await audit.operation_finished(unit.audit, status, approval)

    await uow.run(work)


async def audit_rows(query: AuditQueryV1, ports: Ports) -> AuditPageV1:
    """Audit log rows (admins).

    Admins only: the rows of one approval or operation, or since a time, oldest first."""
    if "admin" not in query.actor.roles:
        raise Refused("forbidden", "the audit log is for admins", 403)
    if query.pending_id is None and query.operation_id is None and query.since is None:
        raise Refused("invalid_query", "give pending_id, operation_id or since", 422)
    found = await ports.unit.read(lambda unit: unit.audit.rows_of(
        pending_id=query.pending_id, operation_id=query.operation_id, since=query.since, limit=query.limit))
    return AuditPageV1(items=[AuditRowV1.model_validate(row.to_wire()) for row in found])


async def audit_chain(query: AuditChainQueryV1, ports: Ports) -> AuditChainPageV1:
    """The audit chain for its verifier (``erpilot audit``): a page of rows in ``seq`` order (and, when asked, every
    checkpoint).

    No actor: NATS lets only the operations user ask (``erpilot.stack.nats_security``). The rows and checkpoints
    go out as stored, for the verifier to check with the public key."""
    async def look(unit: Work) -> tuple[list[AuditRow], list[Checkpoint]]:
        return (await unit.audit.rows_after(query.after_seq, since=query.since, limit=query.limit),
                await unit.audit.checkpoints() if query.with_checkpoints else [])

    found, marks = await ports.unit.read(look)
    return AuditChainPageV1(
        items=[AuditRowV1.model_validate(row.to_wire()) for row in found],
        checkpoints=[AuditCheckpointV1(seq=m.seq, hash=m.hash, signed_at=m.signed_at, signature=m.signature)
                     for m in marks],
        next_after_seq=found[-1].seq if len(found) == query.limit else None)
