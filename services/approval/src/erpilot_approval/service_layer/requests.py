"""``cmd.approval.request``: store a pending approval under the policy in force, idempotent by operation_id."""

from __future__ import annotations

from erpilot_approval.domain.approvals import ApprovalError, ApprovalRequest, PendingApproval, new_pending
from erpilot_approval.domain.ledger import as_the_ledger_prepared, require_prepared
from erpilot_approval.service_layer.common import emit_requested, new_pending_id, refused
from erpilot_approval.service_layer.mapping import ledger_record_of, record_of, request_of
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Ports
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.tools.v1 import get_tool
from erpilot_platform.telemetry import step
from erpilot_platform.tool_arguments import normalised_or_refusal


def check_arguments(tool: str, schema_version: int, arguments: dict) -> ReplyV1 | None:
    """A refusal unless ``arguments`` are exactly the normalised arguments of a known tool version."""
    normalised = normalised_or_refusal(tool, arguments)
    if isinstance(normalised, ReplyV1):
        return normalised
    spec = get_tool(tool)
    if schema_version != spec.schema_version:
        return ReplyV1.failure("invalid_request", f"{tool} has schema_version {spec.schema_version}", 422)
    if normalised != arguments:
        return ReplyV1.failure("invalid_arguments", "arguments are not in normalised form", 422,
                               expected=normalised)
    return None


def _repeat(existing: PendingApproval, request: ApprovalRequest) -> ReplyV1:
    """The stored record for a repeated request, whatever its status; another request is a conflict."""
    asked = (request.fingerprint, request.call_id, request.session_id)
    if (existing.fingerprint, existing.call_id, existing.session_id) != asked:
        return ReplyV1.failure("idempotency_conflict",
                               f"operation {request.operation_id} was requested with another call or fingerprint", 409)
    return ReplyV1.success(record_of(existing))


async def request_approval(cmd: RequestApprovalV1, ports: Ports) -> ReplyV1:
    """Check the request against the ledger's prepared operation, then store it (nothing when refused).

    The ERP is asked before any transaction opens; no answer from it is transient (the command is retried).
    """
    problem = check_arguments(cmd.tool, cmd.tool_schema_version, cmd.arguments)
    if problem is not None:
        return problem
    ledger = ledger_record_of(await ports.erp.prepared(cmd.operation_id))
    try:
        request = as_the_ledger_prepared(request_of(cmd), ledger)
    except ApprovalError as error:
        return refused(error)

    async def work(uow: ApprovalUnitOfWork) -> tuple[ReplyV1, bool]:
        existing = await uow.approvals.get_by_operation(request.operation_id)
        if existing is not None:
            return _repeat(existing, request), False
        now = await uow.now()
        try:
            require_prepared(ledger)
            pending = new_pending(request, ports.policy, now, new_pending_id())
        except ApprovalError as error:
            return refused(error), False
        if not await uow.approvals.insert_new(pending):  # a concurrent delivery inserted it first
            return _repeat(await uow.approvals.get_by_operation(request.operation_id), request), False
        await emit_requested(uow, pending)
        return ReplyV1.success(record_of(pending)), True

    with step("approval", "request", session_id=cmd.session_id, call_id=cmd.call_id,
              operation_id=cmd.operation_id):  # the approval stores this trace: decide and expiry continue it
        reply, created = await ports.store.run(work)
    if created:
        ports.store.wake()
        ports.new_deadline()
    return reply
