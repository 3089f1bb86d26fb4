"""``cmd.approval.edit``: new arguments become a new pending version of the same call; the old one ends
``superseded``.

The new ``operation_id`` is derived from the old ``pending_id`` and the new fingerprint, so a retried
edit (redelivery, a timeout, the person pressing again) asks the ERP to prepare the same operation
(idempotent there) and finds the version it already created: the same person repeating the same edit
gets that version back (201) instead of 409 ``superseded``.
"""

from __future__ import annotations

import hashlib

from erpilot_approval.domain.approvals import ApprovalError, PendingApproval, authorize, new_pending
from erpilot_approval.domain.edits import check_edit, edit_request, edited_version, supersede
from erpilot_approval.service_layer.common import (
    emit_requested,
    emit_resolved,
    expire_if_due,
    new_pending_id,
    not_found,
    refused,
)
from erpilot_approval.service_layer.mapping import preview_json, record_for
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Ports
from erpilot_contracts.approval.v1 import EditApprovalV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint as compute_fingerprint
from erpilot_platform.broker import ReplyError
from erpilot_platform.tool_arguments import normalised_or_refusal


def edited_operation_id(old_pending_id: str, new_fingerprint: str) -> str:
    return "op_" + hashlib.sha256(f"edit:{old_pending_id}:{new_fingerprint}".encode()).hexdigest()[:32]


class _Edit:
    """One edit request once its arguments are validated."""

    def __init__(self, ports: Ports, cmd: EditApprovalV1, arguments: dict, fingerprint: str):
        self.ports, self.cmd, self.arguments, self.fingerprint = ports, cmd, arguments, fingerprint
        self.operation_id = edited_operation_id(cmd.pending_id, fingerprint)

    async def gate(self, uow: ApprovalUnitOfWork, old: PendingApproval) -> tuple[ReplyV1 | None, bool]:
        """Under the old row's lock: the recorded new version for a repeat, a refusal, or (None) go on.

        The second value tells whether the approval was expired here.
        """
        actor = self.cmd.actor
        now = await uow.now()
        if old.status == "superseded" and old.decided_by == actor.sub and self.cmd.fingerprint == old.fingerprint:
            newer = await uow.approvals.get(old.superseded_by) if old.superseded_by else None
            if newer is not None and newer.operation_id == self.operation_id:
                return ReplyV1.success(record_for(newer, actor.sub, actor.roles, now)), False
        try:
            check_edit(old, self.cmd.fingerprint, actor.sub, actor.roles, now)
        except ApprovalError as error:
            expired = error.code == "expired" and await expire_if_due(uow, old, now)
            return refused(error), expired
        return None, False

    async def prepare(self, old: PendingApproval) -> ReplyV1 | dict:
        """The ERP's preview of the edited operation (a dict), or the refusal to answer with."""
        try:
            prepared = await self.ports.erp.prepare(PrepareOperationV1(
                operation_id=self.operation_id, session_id=old.session_id, call_id=old.call_id, tool=old.tool,
                tool_schema_version=old.tool_schema_version, arguments=self.arguments,
                fingerprint=self.fingerprint, requested_by=old.requested_by,
                stock_check=self.ports.policy.for_tool(old.tool).stock_check))
        except ReplyError as refusal:  # a business rejection conflicts with the ledger's state; 5xx: the ERP failed
            error = refusal.error
            status = error.status if error.status in (403, 422) else 409 if error.status < 500 else 502
            return ReplyV1.failure(error.code, error.message, status, **(error.details or {}))
        if (prepared.operation_id, prepared.fingerprint) != (self.operation_id, self.fingerprint):
            return ReplyV1.failure("erp_mismatch", "the ERP prepared another operation or fingerprint", 502)
        return preview_json(prepared.preview)

    async def commit(self, uow: ApprovalUnitOfWork, preview: dict) -> tuple[ReplyV1, bool]:
        """Lock the old version again (it may have changed meanwhile), then supersede it with the new one."""
        old = await uow.approvals.get(self.cmd.pending_id, lock=True)
        stop, expired = await self.gate(uow, old)
        if stop is not None:
            return stop, expired
        now = await uow.now()
        request = edit_request(old, self.arguments, self.fingerprint, self.operation_id, preview)
        try:
            new = new_pending(request, self.ports.policy, now, new_pending_id(), supersedes=old.pending_id)
        except ApprovalError as error:  # the policy in force changed since the first version
            return refused(error), False
        new = edited_version(new, old, self.cmd.actor.sub)
        origin = await uow.approvals.trace_context(old.pending_id)  # the new version continues the call's trace
        if not await uow.approvals.insert_new(new, trace_context=origin):
            return ReplyV1.failure("idempotency_conflict", f"operation {self.operation_id} exists already", 409), False
        ended = supersede(old, new.pending_id, now, decided_by=self.cmd.actor.sub)
        await uow.approvals.save_outcome(ended)
        await uow.approvals.append_decision(old.pending_id, actor=self.cmd.actor.sub, action="edit",
                                            fingerprint=self.cmd.fingerprint, comment=None, at=now)
        await emit_resolved(uow, ended)
        await emit_requested(uow, new)
        return ReplyV1.success(record_for(new, self.cmd.actor.sub, self.cmd.actor.roles, now)), True


async def edit(cmd: EditApprovalV1, ports: Ports) -> ReplyV1:
    """Check (role, state, deadline, fingerprint, arguments), ask the ERP for a preview, then swap versions."""
    old = await ports.store.read(lambda uow: uow.approvals.get(cmd.pending_id))
    if old is None:
        return not_found(cmd.pending_id)
    try:
        authorize(old, "approve", cmd.actor.sub, cmd.actor.roles)
    except ApprovalError as error:
        return refused(error)
    arguments = normalised_or_refusal(old.tool, cmd.arguments)
    if isinstance(arguments, ReplyV1):
        return arguments
    job = _Edit(ports, cmd, arguments, compute_fingerprint(old.tool, old.tool_schema_version, arguments))

    async def check(uow: ApprovalUnitOfWork) -> tuple[ReplyV1 | None, bool]:
        return await job.gate(uow, await uow.approvals.get(cmd.pending_id, lock=True))

    stop, changed = await ports.store.run(check)
    if stop is None:
        preview = await job.prepare(old)  # no transaction or lock is held while the ERP works
        if isinstance(preview, ReplyV1):
            return preview
        stop, changed = await ports.store.run(lambda uow: job.commit(uow, preview))
    if changed:
        ports.store.wake()
    return stop
