"""PREPARE and COMMIT of the write tools (SPEC §3), each one database transaction.

prepare: verify the fingerprint, run the domain's prepare, store the operation (arguments, fingerprint,
facts, preview) and answer the preview; the answer (a rejection too) is stored under the operation id.

commit: verify the grant (signature, operation, fingerprint, not consumed), lock the operation and then the
rows the tool needs, re-check the facts, apply the effect, record the outcome, consume the grant and write
``evt.erp.operation_finished`` to the outbox, all in one transaction. A commit of a finished operation
answers its recorded status and does nothing else. A grant that fails verification changes nothing.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from erpilot_contracts import subjects
from erpilot_contracts.base import ErrorV1, ReplyV1
from erpilot_contracts.erp.v1 import (
    CommitOperationV1,
    OperationStatusV1,
    PreparedOperationV1,
    PreparedRecordV1,
    PrepareOperationV1,
    PreviewV1,
)
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import get_tool
from erpilot_erp.domain import operations as domain
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.plans import StockCheck
from erpilot_erp.service_layer import to_domain
from erpilot_erp.service_layer.ports import Ledger, LedgerUnitOfWork, OperationRecord
from erpilot_erp.service_layer.replies import (
    business_error,
    business_failure,
    once,
)
from erpilot_erp.service_layer.write_state import write_state
from erpilot_platform.failpoints import failpoint
from erpilot_platform.grants import verify_grant
from erpilot_platform.telemetry import commit_outcomes, step
from erpilot_platform.tool_arguments import normalised_or_refusal

log = logging.getLogger(__name__)
_NESTED_VERSIONS = {"preview": {"schema_version": True, "effects": {"__all__": {"schema_version"}}}}


def operation_status(row: OperationRecord | Any) -> OperationStatusV1:
    """The status of a stored operation, as ``query.erp.operation``, commits and the event tell it."""
    return OperationStatusV1(
        operation_id=row.operation_id, tool=row.tool, status=row.status, session_id=row.session_id,
        requested_by=row.requested_by, result=row.result,
        error=ErrorV1.model_validate(row.error) if row.error else None, committed_at=row.committed_at)


def preview_json(preview: dict[str, Any]) -> dict[str, Any]:
    """A stored preview as it travels to the approval and to people: without a schema_version anywhere."""
    return PreviewV1.model_validate(preview).model_dump(mode="json", exclude=_NESTED_VERSIONS["preview"])


def prepared_record(row: OperationRecord | Any) -> PreparedRecordV1:
    """The ledger's own record of an operation: what ``query.erp.prepared`` answers the approval service."""
    return PreparedRecordV1(
        operation_id=row.operation_id, tool=row.tool, session_id=row.session_id, call_id=row.call_id,
        requested_by=row.requested_by, arguments=row.arguments, fingerprint=row.fingerprint,
        preview=preview_json(row.preview), status=row.status)


def invalid_grant(reason: str) -> ReplyV1:
    return ReplyV1.failure("invalid_grant", f"the grant is not valid: {reason}; nothing was committed", 403)


class OperationService:
    def __init__(self, ledger: Ledger, verify_key: Ed25519PublicKey, *, default_stock_check: StockCheck = "exact"):
        self.ledger = ledger
        self.verify_key = verify_key
        self.default_stock_check = default_stock_check

    # --- prepare ------------------------------------------------------------------------------------
    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        if cmd.tool not in domain.WRITE_TOOLS:
            return ReplyV1.failure("not_a_write_tool", f"{cmd.tool} is not a write tool", 422)
        if cmd.tool_schema_version != get_tool(cmd.tool).schema_version:
            return ReplyV1.failure("unsupported_schema_version",
                                   f"{cmd.tool} has no schema_version {cmd.tool_schema_version}", 422)
        args = normalised_or_refusal(cmd.tool, cmd.arguments)
        if isinstance(args, ReplyV1):
            return args
        if args != cmd.arguments:
            return ReplyV1.failure("invalid_arguments", "arguments must be sent in normalised form", 422)
        if fingerprint(cmd.tool, cmd.tool_schema_version, args) != cmd.fingerprint:
            return ReplyV1.failure("fingerprint_mismatch", "the fingerprint does not match tool and arguments", 422)
        asked = {"fingerprint": cmd.fingerprint, "session_id": cmd.session_id, "call_id": cmd.call_id}

        async def work(uow: LedgerUnitOfWork) -> ReplyV1:
            return await once(uow, f"prepare:{cmd.operation_id}", asked, lambda: self._prepare(uow, cmd))

        with step("erp", "prepare", session_id=cmd.session_id, call_id=cmd.call_id, operation_id=cmd.operation_id):
            reply = await self.ledger.run(work)
        failpoint("erp.prepare.after_db_commit")
        return reply

    async def _prepare(self, uow: LedgerUnitOfWork, cmd: PrepareOperationV1) -> ReplyV1:
        state = await write_state(uow.repo, cmd.tool, cmd.arguments, cmd.session_id)
        try:
            prepared = domain.prepare(to_domain.write(cmd.tool, cmd.arguments), state, datetime.now(UTC),
                                      stock_check=cmd.stock_check or self.default_stock_check)
        except BusinessError as exc:
            return business_failure(exc)
        await uow.repo.insert_operation(
            operation_id=cmd.operation_id, tool=cmd.tool, session_id=cmd.session_id, call_id=cmd.call_id,
            requested_by=cmd.requested_by, arguments=cmd.arguments, fingerprint=cmd.fingerprint,
            facts=prepared.facts, preview=prepared.preview)
        answer = PreparedOperationV1(operation_id=cmd.operation_id, tool=cmd.tool, fingerprint=cmd.fingerprint,
                                     preview=PreviewV1.model_validate(prepared.preview))
        # The preview travels on to the approval and to people: without a schema_version on every effect.
        return ReplyV1.success(answer.model_dump(mode="json", exclude=_NESTED_VERSIONS))

    # --- commit -------------------------------------------------------------------------------------
    async def commit(self, cmd: CommitOperationV1) -> ReplyV1:
        grant = cmd.grant
        with step("erp", "commit", operation_id=cmd.operation_id, pending_id=grant.pending_id):
            if not verify_grant(grant, self.verify_key):
                return _counted(invalid_grant("its signature does not verify"))
            if grant.operation_id != cmd.operation_id:
                return _counted(invalid_grant("it was issued for another operation"))
            reply, replayed = await self.ledger.run(lambda uow: self._commit(uow, cmd))
        failpoint("erp.commit.after_db_commit")
        self.ledger.wake()
        return reply if replayed else _counted(reply)

    async def _commit(self, uow: LedgerUnitOfWork, cmd: CommitOperationV1) -> tuple[ReplyV1, bool]:
        """The answer, and whether it only repeats an outcome recorded earlier."""
        grant = cmd.grant
        op = await uow.repo.operation(cmd.operation_id, lock=True)
        if op is None:
            return ReplyV1.failure("not_found", f"operation {cmd.operation_id} was never prepared", 404), False
        if grant.fingerprint != op.fingerprint:
            return ReplyV1.failure("operation_conflict",
                                   f"operation {cmd.operation_id} was prepared with another fingerprint", 409), False
        if op.status != "prepared":  # already finished: the recorded outcome, no second effect
            return ReplyV1.success(operation_status(op)), True
        if not await uow.repo.consume_grant(grant.pending_id, op.operation_id):
            return invalid_grant(f"grant {grant.pending_id} was already used"), False
        state = await write_state(uow.repo, op.tool, op.arguments, op.session_id, facts=op.facts, lock=True)
        kind = domain.NEW_ID_KIND.get(op.tool)
        new_id = await uow.repo.next_id(kind) if kind else None
        try:
            plan = domain.commit(to_domain.write(op.tool, op.arguments), op.facts, state, datetime.now(UTC),
                                 stock_check=grant.stock_check or "exact", new_id=new_id)
        except BusinessError as exc:
            log.info("operation %s rejected: %s", op.operation_id, exc)
            row = await uow.repo.finish_operation(op.operation_id, status="rejected",
                                                  pending_id=grant.pending_id, error=business_error(exc))
        else:
            await uow.repo.apply_plan(plan, operation_id=op.operation_id, session_id=op.session_id)
            row = await uow.repo.finish_operation(op.operation_id, status="committed",
                                                  pending_id=grant.pending_id, result=plan.result)
        status = operation_status(row)
        await uow.emit(subjects.ERP_EVT_OPERATION_FINISHED, status,
                       msg_id=f"erp.operation_finished.{op.operation_id}")
        failpoint("erp.commit.before_db_commit")  # effect, result and consumed grant written, not committed
        return ReplyV1.success(status), False


def _counted(reply: ReplyV1) -> ReplyV1:
    """Count a commit's new outcome: committed, rejected (by business code) or refused (by error code)."""
    if reply.ok:
        status, code = reply.data["status"], (reply.data.get("error") or {}).get("code", "")
    else:
        status, code = "refused", reply.error.code
    commit_outcomes.add(1, {"status": status, "code": code})
    return reply
