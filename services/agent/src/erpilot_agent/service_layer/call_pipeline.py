"""Moving a recorded tool call forward (SPEC §3): (read|draft) run, or prepare → request approval →
(a person decides) → commit with the grant → finish; and settling a commit whose answer never came.

Every step first records its intent, so a crash anywhere resumes from the recorded state: a
redelivered command, an approval event, or the reconciler picks the call up again. Each downstream
step is idempotent by ``operation_id`` (ERP and approval), so repeating it is safe. Every change of a
call is one ``transition``: under the call's lock, its state and its events in one unit of work.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.tool_calls import CallState, PendingApproval, ToolCall
from erpilot_agent.service_layer.call_ports import CallDownstream, CallRecord, UnitOfWorkFactory
from erpilot_contracts.approval.v1 import ApprovalRecordV1, GrantV1, RequestApprovalV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_platform.broker import ReplyError
from erpilot_platform.failpoints import failpoint
from erpilot_platform.telemetry import step

log = logging.getLogger(__name__)
OnFinished = Callable[[str], Awaitable[None]]


class CallPipeline:
    def __init__(self, uow: UnitOfWorkFactory, downstream: CallDownstream, *, public_url: str,
                 on_finished: OnFinished | None = None):
        self.uow = uow
        self.downstream = downstream
        self.public_url = public_url.rstrip("/")
        self.on_finished = on_finished

    async def advance(self, key: str, record: CallRecord | None = None, *,
                      owner: str | None = None) -> CallRecord | None:
        """Take the call through every step that needs no person, from wherever it stands; the call as
        it stands then.

        ``record``: the call as just read or saved (saves reading it again); ``owner``: its session's
        owner, when the caller knows it. Each step answers the call as its last transition saved it,
        or None when it changed nothing (then it is read again).
        """
        for _ in range(6):  # each step moves the state forward; the bound guards against a loop
            if record is None:
                async with self.uow(read_only=True) as uow:
                    record = await uow.calls.get(key)
            state = record.call.state
            if state is CallState.RUNNING:
                record = await self._run(record, owner)
            elif state is CallState.PREPARING:
                record = await self._prepare_and_request(record, owner)
            elif state in (CallState.APPROVED, CallState.EXECUTING):
                record = await self._commit(record)
            else:
                return record
        return record

    # --- the steps -----------------------------------------------------------------------------
    async def _run(self, record: CallRecord, owner: str | None) -> CallRecord | None:
        change = await self.run_at_erp(session_id=record.session_id, call_id=record.call_id,
                                       operation_id=record.operation_id, call=record.call,
                                       requested_by=owner or await self._owner(record))
        return await self.transition(record.call_key, change)

    async def run_at_erp(self, *, session_id: str, call_id: str, operation_id: str, call: ToolCall,
                         requested_by: str | None) -> Callable[[ToolCall], list]:
        """Run a read or draft at the ERP; returns the change that records its outcome (a finish that a
        concurrent delivery of the call recorded first stands). The ERP's own failure (5xx) is raised:
        the command is retried, then dead-lettered."""
        cmd = ExecuteToolV1(session_id=session_id, call_id=call_id, operation_id=operation_id,
                            tool=call.tool, arguments=call.arguments, requested_by=requested_by)
        kind = get_tool(call.tool).kind
        try:
            result = await (self.downstream.read(cmd) if kind is ToolKind.READ else self.downstream.draft(cmd))
        except ReplyError as exc:  # the ERP answered with an error that is not a business outcome
            if exc.error.status >= 500:
                raise
            return _first_finish("failed", error={"code": exc.error.code, "message": exc.error.message})
        if result.outcome == "succeeded":
            return _first_finish("succeeded", result=result.result)
        return _first_finish("business_rejected", error={"code": result.error.code, "message": result.error.message})

    async def _prepare_and_request(self, record: CallRecord, owner: str | None) -> CallRecord | None:
        with step("agent", "request approval", session_id=record.session_id, call_id=record.call_id,
                  operation_id=record.operation_id):
            return await self._prepare_and_request_approval(record, owner or await self._owner(record))

    async def _prepare_and_request_approval(self, record: CallRecord, owner: str | None) -> CallRecord | None:
        tool, arguments = record.call.tool, record.call.arguments
        spec = get_tool(tool)
        operation_fingerprint = fingerprint(tool, spec.schema_version, arguments)
        policy = await self.downstream.policy(tool)
        reply = await self.downstream.prepare(PrepareOperationV1(
            operation_id=record.operation_id, session_id=record.session_id, call_id=record.call_id, tool=tool,
            tool_schema_version=spec.schema_version, arguments=arguments, fingerprint=operation_fingerprint,
            requested_by=owner, stock_check=policy.stock_check))
        if not reply.ok:
            error = {"code": reply.error.code, "message": reply.error.message}
            outcome = "business_rejected" if reply.error.status < 500 else "failed"
            return await self.transition(record.call_key, lambda c: c.finish(outcome, error=error))
        approval = await self.downstream.request_approval(RequestApprovalV1(
            call_id=record.call_id, session_id=record.session_id, tool=tool, tool_schema_version=spec.schema_version,
            arguments=arguments, fingerprint=operation_fingerprint, operation_id=record.operation_id,
            preview=reply.data["preview"], requested_by=owner))
        return await self.approval_requested(approval)

    async def _commit(self, record: CallRecord) -> CallRecord | None:
        with step("agent", "commit", session_id=record.session_id, call_id=record.call_id,
                  operation_id=record.operation_id, pending_id=(record.grant or {}).get("pending_id")):
            return await self._commit_with_grant(record)

    async def _commit_with_grant(self, record: CallRecord) -> CallRecord | None:
        if record.call.state is CallState.APPROVED:
            await self.transition(record.call_key, lambda c: c.begin_execution(), commit_sent=True)
        failpoint("agent.commit.before_send")
        grant = GrantV1.model_validate(record.grant)
        try:
            status = await self.downstream.commit(record.operation_id, grant)
        except ReplyError as exc:  # e.g. invalid_grant, operation_conflict: not a business outcome
            error = {"code": exc.error.code, "message": exc.error.message}
            return await self.transition(record.call_key, lambda c: c.finish("failed", error=error))
        failpoint("agent.commit.after_send")
        return await self.record_commit_outcome(record.call_key, status.status, status.result, status.error)

    async def record_commit_outcome(self, key: str, status: str, result: dict | None,
                                    error: Any) -> CallRecord | None:
        if status == "committed":
            return await self.transition(key, lambda c: c.finish("succeeded", result=result))
        if status == "rejected":
            detail = {"code": error.code, "message": error.message}
            return await self.transition(key, lambda c: c.finish("business_rejected", error=detail))
        return None

    async def approval_requested(self, record: ApprovalRecordV1) -> CallRecord | None:
        """A pending approval exists for one of our calls: the first one, or an edit's new version."""
        self.downstream.policy_version_seen(record.policy_version)  # a new policy: ask for it again
        pending = PendingApproval(
            pending_id=record.pending_id, fingerprint=record.fingerprint, expires_at=record.expires_at,
            preview=record.preview, approval_url=f"{self.public_url}/resume/{record.pending_id}",
            edited_by=record.edited_by)

        def apply(call: ToolCall) -> list:
            if record.supersedes and call.pending and call.pending.pending_id == record.supersedes:
                # The old version ended by the edit of the person who made the new one, not the requester.
                return call.supersede(record.supersedes, pending, decided_by=record.edited_by)
            return call.await_approval(pending)

        # An edit brings new arguments and a new operation id for the same call.
        extra = {"operation_id": record.operation_id, "arguments": record.arguments} if record.supersedes else {}
        return await self.transition(call_key(record.session_id, record.call_id), apply, **extra)

    # --- reconciliation ----------------------------------------------------------------------
    async def reconcile(self, record: CallRecord) -> None:
        """A commit whose answer never arrived: ask the ERP, never a person; re-send if not committed."""
        try:
            status = await self.downstream.operation_status(record.operation_id)
        except ReplyError as exc:
            if exc.error.code != "not_found":
                raise
            status = None
        if status is not None and status.status in ("committed", "rejected"):
            await self.record_commit_outcome(record.call_key, status.status, status.result, status.error)
        else:
            await self.advance(record.call_key)

    # --- the one way a call changes ------------------------------------------------------------
    async def transition(self, key: str, change: Callable[[ToolCall], list], *, commit_sent: bool = False,
                         **columns: Any) -> CallRecord | None:
        """Apply one lifecycle transition under the call's row lock, with its events, in one transaction;
        the call as saved, None if the transition changed nothing."""
        async with self.uow() as uow:
            record = await uow.calls.get(key, lock=True)
            if record is None:
                log.warning("event for unknown call %s ignored", key)
                return None
            call = record.call
            events = change(call)
            if not events:
                return None
            saved = await uow.calls.save(key, call, events=events, commit_sent=commit_sent, **columns)
            await uow.commit()
        if call.state is CallState.FINISHED:
            await self.finished(saved)
        return saved

    async def finished(self, record: CallRecord) -> None:
        """Tell the run driver; only a model's call can have a run waiting for it."""
        if record.source == "model" and self.on_finished:
            await self.on_finished(record.call_key)

    async def _owner(self, record: CallRecord) -> str | None:
        async with self.uow(read_only=True) as uow:
            return await uow.owner_of(record.session_id)


def _first_finish(outcome: str, **detail: Any) -> Callable[[ToolCall], list]:
    """Finish a read or draft unless a concurrent delivery of the call finished it first (that result stands)."""
    return lambda call: [] if call.state is CallState.FINISHED else call.finish(outcome, **detail)
