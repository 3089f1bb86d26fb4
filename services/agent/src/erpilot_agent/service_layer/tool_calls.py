"""The tool-call pipeline (SPEC §3): validate → record → (read|draft) run, or prepare → request approval
→ wait durably → commit with the grant → finish.

Every step first records its intent, so a crash anywhere resumes from the recorded state: a
redelivered command, an approval event, or the reconciler picks the call up again. Each downstream
step is idempotent by ``operation_id`` (ERP and approval), so repeating it is safe.

A call is its session's ``call_id`` (fixed before the command's first publish); everything here keys
on the derived ``call_key``, and ``operation_id`` derives from it (``domain.call_identity``), so every
delivery of one command, even concurrent ones in two replicas, finds or creates the same single call.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import rfc8785
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_agent.adapters import calls, repository
from erpilot_agent.adapters.downstream import Downstream, DownstreamError
from erpilot_agent.domain.call_identity import call_key, operation_id_for
from erpilot_agent.domain.tool_calls import CallState, PendingApproval, ToolCall
from erpilot_contracts.approval.v1 import ApprovalRecordV1, GrantV1, RequestApprovalV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import InvalidArguments, ToolKind, UnknownTool, get_tool, normalise
from erpilot_platform.broker import TransientError
from erpilot_platform.failpoints import failpoint
from erpilot_platform.logs import bind, unbind
from erpilot_platform.telemetry import step

log = logging.getLogger(__name__)
OnFinished = Callable[[str], Awaitable[None]]


class CallRejected(Exception):
    """The call cannot start; nothing was recorded. Carries the reply to give."""

    def __init__(self, reply: ReplyV1):
        super().__init__(reply.error.code)
        self.reply = reply


def request_hash(tool: str, arguments: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps({"tool": tool, "arguments": arguments})).hexdigest()


class ToolCallService:
    def __init__(self, engine: AsyncEngine, downstream: Downstream, *, public_url: str,
                 on_finished: OnFinished | None = None):
        self.engine = engine
        self.downstream = downstream
        self.public_url = public_url.rstrip("/")
        self.on_finished = on_finished

    # --- entry points ------------------------------------------------------------------------
    async def start(self, *, session_id: str, owner: str, tool: str, raw_arguments: Any,
                    call_id: str, source: str = "external", run_id: str | None = None) -> dict[str, Any]:
        """Validate, record and drive one call as far as it goes without a person; returns its view.

        Idempotent by (``session_id``, ``call_id``): the same tool and arguments again get the same
        call's view; other ones 409 ``idempotency_conflict``. Other sessions' calls are never looked at.
        """
        key = call_key(session_id, call_id)
        token = bind(session_id=session_id, call_id=call_id)
        try:
            digest = request_hash(tool, raw_arguments)
            async with self.engine.begin() as conn:
                session = await repository.get_session(conn, session_id)
                if session is None or session.owner != owner:
                    raise CallRejected(ReplyV1.failure("not_found", f"session {session_id} not found", 404))
                existing = await repository.get_tool_call(conn, key)
            if existing is None:
                await self._record_new(key, session_id, call_id, tool, raw_arguments, source, run_id)
                async with self.engine.connect() as conn:
                    existing = await repository.get_tool_call(conn, key)
            if existing.request_hash != digest:  # also a concurrent delivery of another request won
                raise CallRejected(ReplyV1.failure(
                    "idempotency_conflict", f"call_id {call_id} was used with another request", 409))
            await self.advance(key)
            return await self.view(key)
        finally:
            unbind(token)

    async def _record_new(self, key: str, session_id: str, call_id: str, tool: str, raw_arguments: Any,
                          source: str, run_id: str | None) -> None:
        try:
            arguments = normalise(tool, raw_arguments)
        except UnknownTool:
            raise CallRejected(ReplyV1.failure("unknown_tool", f"unknown tool {tool!r}", 422)) from None
        except InvalidArguments as exc:
            raise CallRejected(ReplyV1.failure(
                "invalid_arguments", f"arguments do not match the schema of {tool}", 422, errors=exc.errors)) from None
        policy = await self.downstream.policy(tool)
        if policy.action == "deny":
            raise CallRejected(ReplyV1.failure("policy_denied", f"the policy denies {tool}", 403))
        call = ToolCall(call_id=call_id, tool=tool, arguments=arguments)
        events = call.start(needs_approval=policy.action == "require_approval")
        async with self.engine.begin() as conn:
            if not await repository.insert_tool_call(
                    conn, call_key=key, call_id=call_id, session_id=session_id, run_id=run_id, source=source,
                    tool=tool, request_hash=request_hash(tool, raw_arguments), operation_id=operation_id_for(key),
                    **calls.to_columns(call)):
                return  # a concurrent delivery of the same command recorded it first: no second call
            await self._emit(conn, session_id, events)
        repository.outbox.wake()
        return True

    async def view(self, key: str) -> dict[str, Any]:
        async with self.engine.connect() as conn:
            row = await repository.get_tool_call(conn, key)
        return calls.view(row, calls.to_domain(row))

    # --- driving a call ----------------------------------------------------------------------
    async def advance(self, key: str) -> None:
        """Take the call through every step that needs no person, from wherever it stands."""
        for _ in range(6):  # each step moves the state forward; the bound guards against a loop
            async with self.engine.connect() as conn:
                row = await repository.get_tool_call(conn, key)
            state = CallState(row.status)
            if state is CallState.RUNNING:
                await self._run(row)
            elif state is CallState.PREPARING:
                await self._prepare_and_request(row)
            elif state in (CallState.APPROVED, CallState.EXECUTING):
                await self._commit(row)
            else:
                return

    async def _run(self, row: Any) -> None:
        cmd = ExecuteToolV1(session_id=row.session_id, call_id=row.call_id, operation_id=row.operation_id,
                            tool=row.tool, arguments=row.arguments, requested_by=await self._owner(row))
        kind = get_tool(row.tool).kind
        try:
            result = await (self.downstream.read(cmd) if kind is ToolKind.READ else self.downstream.draft(cmd))
        except DownstreamError as exc:  # the ERP answered with an error that is not a business outcome
            if exc.error.status >= 500:
                raise  # the ERP's own failure, not the call's: retried, then dead-lettered, as before
            error = {"code": exc.error.code, "message": exc.error.message}
            await self._transition(row.call_key, _first_finish("failed", error=error))
            return
        if result.outcome == "succeeded":
            await self._transition(row.call_key, _first_finish("succeeded", result=result.result))
        else:
            error = {"code": result.error.code, "message": result.error.message}
            await self._transition(row.call_key, _first_finish("business_rejected", error=error))

    async def _prepare_and_request(self, row: Any) -> None:
        with step("agent", "request approval", session_id=row.session_id, call_id=row.call_id,
                  operation_id=row.operation_id):
            await self._prepare_and_request_approval(row)

    async def _prepare_and_request_approval(self, row: Any) -> None:
        owner = await self._owner(row)
        spec = get_tool(row.tool)
        operation_fingerprint = fingerprint(row.tool, spec.schema_version, row.arguments)
        policy = await self.downstream.policy(row.tool)
        reply = await self.downstream.prepare(PrepareOperationV1(
            operation_id=row.operation_id, session_id=row.session_id, call_id=row.call_id, tool=row.tool,
            tool_schema_version=spec.schema_version, arguments=row.arguments, fingerprint=operation_fingerprint,
            requested_by=owner, stock_check=policy.stock_check))
        if not reply.ok:
            error = {"code": reply.error.code, "message": reply.error.message}
            outcome = "business_rejected" if reply.error.status < 500 else "failed"
            await self._transition(row.call_key, lambda c: c.finish(outcome, error=error))
            return
        record = await self.downstream.request_approval(RequestApprovalV1(
            call_id=row.call_id, session_id=row.session_id, tool=row.tool, tool_schema_version=spec.schema_version,
            arguments=row.arguments, fingerprint=operation_fingerprint, operation_id=row.operation_id,
            preview=reply.data["preview"], requested_by=owner))
        await self.on_approval_requested(record)

    async def _commit(self, row: Any) -> None:
        with step("agent", "commit", session_id=row.session_id, call_id=row.call_id, operation_id=row.operation_id,
                  pending_id=(row.grant or {}).get("pending_id")):
            await self._commit_with_grant(row)

    async def _commit_with_grant(self, row: Any) -> None:
        call = calls.to_domain(row)
        if call.state is CallState.APPROVED:
            await self._transition(row.call_key, lambda c: c.begin_execution(), commit_sent=True)
        failpoint("agent.commit.before_send")
        grant = GrantV1.model_validate(row.grant)
        try:
            status = await self.downstream.commit(row.operation_id, grant)
        except DownstreamError as exc:  # e.g. invalid_grant, operation_conflict: not a business outcome
            error = {"code": exc.error.code, "message": exc.error.message}
            await self._transition(row.call_key, lambda c: c.finish("failed", error=error))
            return
        failpoint("agent.commit.after_send")
        await self._record_commit_outcome(row.call_key, status.status, status.result, status.error)

    async def _record_commit_outcome(self, key: str, status: str, result: dict | None, error: Any) -> None:
        if status == "committed":
            await self._transition(key, lambda c: c.finish("succeeded", result=result))
        elif status == "rejected":
            detail = {"code": error.code, "message": error.message}
            await self._transition(key, lambda c: c.finish("business_rejected", error=detail))

    # --- approval events ---------------------------------------------------------------------
    async def on_approval_requested(self, record: ApprovalRecordV1) -> None:
        """A pending approval exists for one of our calls: the first one, or an edit's new version."""
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
        await self._transition(call_key(record.session_id, record.call_id), apply, **extra)

    async def on_approval_resolved(self, *, session_id: str, call_id: str, pending_id: str, status: str,
                                   decided_by: str | None, comment: str | None, grant: GrantV1 | None) -> None:
        if status == "superseded":
            return  # handled with the new version's approval-requested event (it carries the new pending)
        key = call_key(session_id, call_id)
        await self._require_known_pending(key, pending_id)
        extra = {"grant": grant.model_dump(mode="json")} if grant else {}
        changed = await self._transition(
            key, lambda c: c.resolve(pending_id, status, decided_by=decided_by, comment=comment),
            only_if_current=pending_id, **extra)
        if changed and status == "approved":
            failpoint("agent.approval.after_record")  # the grant is recorded, the commit not yet started
            await self.advance(key)

    async def _require_known_pending(self, key: str, pending_id: str) -> None:
        """Retry later when a decision arrives before we learned of its approval.

        ``requested`` and ``resolved`` events come through separate consumers, so a fast decision on
        an edited (new) version can overtake the event that introduces it; dropping it would lose the
        decision. A finished or unknown call has nothing to wait for.
        """
        async with self.engine.connect() as conn:
            row = await repository.get_tool_call(conn, key)
        if row is None:
            return
        call = calls.to_domain(row)
        known = pending_id in call.resolutions or (call.pending is not None and call.pending.pending_id == pending_id)
        if not known and call.state is not CallState.FINISHED:
            raise TransientError(f"approval {pending_id} of call {row.call_id} is not known here yet")

    # --- reconciliation ----------------------------------------------------------------------
    async def reconcile(self, row: Any) -> None:
        """A commit whose answer never arrived: ask the ERP, never a person; re-send if not committed."""
        try:
            status = await self.downstream.operation_status(row.operation_id)
        except DownstreamError as exc:
            if exc.error.code != "not_found":
                raise
            status = None
        if status is not None and status.status in ("committed", "rejected"):
            await self._record_commit_outcome(row.call_key, status.status, status.result, status.error)
        else:
            await self.advance(row.call_key)

    # --- helpers -----------------------------------------------------------------------------
    async def _owner(self, row: Any) -> str:
        async with self.engine.connect() as conn:
            return (await repository.get_session(conn, row.session_id)).owner

    async def _transition(self, key: str, change: Callable[[ToolCall], list], *, commit_sent: bool = False,
                          only_if_current: str | None = None, **columns: Any) -> bool:
        """Apply one lifecycle transition under the call's row lock, with its events, in one transaction."""
        async with self.engine.begin() as conn:
            row = await repository.get_tool_call(conn, key, lock=True)
            if row is None:
                log.warning("event for unknown call %s ignored", key)
                return False
            call = calls.to_domain(row)
            if only_if_current and (call.pending is None or (
                    call.pending.pending_id != only_if_current and only_if_current not in call.resolutions)):
                log.info("resolution of %s does not concern call %s now; ignored", only_if_current, row.call_id)
                return False
            events = change(call)
            if not events:
                return False
            values = {**calls.to_columns(call), **columns}
            if commit_sent:
                values["commit_sent_at"] = repository.now()
            await repository.update_tool_call(conn, key, **values)
            await self._emit(conn, row.session_id, events)
        repository.outbox.wake()
        if call.state is CallState.FINISHED and self.on_finished:
            await self.on_finished(key)
        return True

    @staticmethod
    async def _emit(conn: AsyncConnection, session_id: str, events: list) -> None:
        await repository.append_events(conn, session_id, [(e.type, e.data) for e in events])


def _first_finish(outcome: str, **detail: Any) -> Callable[[ToolCall], list]:
    """Finish a read or draft unless a concurrent delivery of the call finished it first (that result stands)."""
    return lambda call: [] if call.state is CallState.FINISHED else call.finish(outcome, **detail)
