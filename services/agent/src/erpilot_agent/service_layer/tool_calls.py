"""Tool calls (SPEC §3): a command starts one (validate → record → drive it as far as it goes without a
person, ``call_pipeline``); approval events move it on; the reconciler settles lost commit answers.

A call is its session's ``call_id`` (fixed before the command's first publish); everything here keys
on the derived ``call_key``, and ``operation_id`` derives from it (``domain.call_identity``), so every
delivery of one command, even concurrent ones in two replicas, finds or creates the same single call.
"""

from __future__ import annotations

import hashlib
import logging
from functools import partial
from typing import Any

import rfc8785

from erpilot_agent.adapters import calls
from erpilot_agent.domain.call_identity import call_key, operation_id_for
from erpilot_agent.domain.tool_calls import CallState, ToolCall
from erpilot_agent.service_layer.call_pipeline import CallPipeline, OnFinished
from erpilot_agent.service_layer.call_ports import CallDownstream, CallRecord, CallRejected, UnitOfWorkFactory
from erpilot_contracts.approval.v1 import ApprovalRecordV1, GrantV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_platform.broker import TransientError
from erpilot_platform.failpoints import failpoint
from erpilot_platform.idempotency import Decision, decide, request_digest
from erpilot_platform.logs import bind, unbind
from erpilot_platform.tool_arguments import normalised_or_refusal

__all__ = ["CallRejected", "ToolCallService", "request_hash"]
log = logging.getLogger(__name__)


def request_hash(tool: str, arguments: Any) -> str:
    """What a ``call_id`` was used for, as the call row stores it (``erpilot_platform.idempotency``)."""
    return request_digest({"tool": tool, "arguments": arguments})


def legacy_request_hash(tool: str, arguments: Any) -> str:
    """The unversioned ``sha256:<hex>`` call rows stored before ``request_hash``: a retry of such a call
    after the upgrade is still its repeat."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps({"tool": tool, "arguments": arguments})).hexdigest()


class ToolCallService:
    def __init__(self, uow: UnitOfWorkFactory, downstream: CallDownstream, *, public_url: str,
                 on_finished: OnFinished | None = None):
        self.uow = uow
        self.downstream = downstream
        self.pipeline = CallPipeline(uow, downstream, public_url=public_url, on_finished=on_finished)

    @property
    def on_finished(self) -> OnFinished | None:
        """Called with the ``call_key`` of every call of a model run (source "model") that finishes (the
        run driver's hook)."""
        return self.pipeline.on_finished

    @on_finished.setter
    def on_finished(self, hook: OnFinished | None) -> None:
        self.pipeline.on_finished = hook

    # --- a command starts a call -------------------------------------------------------------
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
            async with self.uow(read_only=True) as uow:
                if await uow.owner_of(session_id) != owner:
                    raise CallRejected(ReplyV1.failure("not_found", f"session {session_id} not found", 404))
                existing = await uow.calls.get(key)
            if existing is None:
                existing = await self._record_new(key, session_id, call_id, tool, raw_arguments, digest, owner,
                                                  source, run_id)
            legacy = partial(legacy_request_hash, tool, raw_arguments)
            if decide(existing.request_hash, digest, legacy=legacy) is Decision.CONFLICT:
                # also when a concurrent delivery of another request recorded the call first
                raise CallRejected(ReplyV1.failure(
                    "idempotency_conflict", f"call_id {call_id} was used with another request", 409))
            current = await self.pipeline.advance(key, existing, owner=owner)
            return calls.view(current, current.call) if current is not None else await self.view(key)
        finally:
            unbind(token)

    async def _record_new(self, key: str, session_id: str, call_id: str, tool: str, raw_arguments: Any, digest: str,
                          owner: str, source: str, run_id: str | None) -> CallRecord:
        """Record the new call; the recorded one (a concurrent delivery's, if that one was first).

        A read has no effect to make exactly once, so it runs before anything is recorded and is
        recorded once, finished, with its events in the same transaction (a crash before that
        commit leaves nothing: the redelivered command reads again). Every other call is recorded
        first and then driven by ``advance``.
        """
        arguments = normalised_or_refusal(tool, raw_arguments)
        if isinstance(arguments, ReplyV1):
            raise CallRejected(arguments)
        policy = await self.downstream.policy(tool)
        if policy.action == "deny":
            raise CallRejected(ReplyV1.failure("policy_denied", f"the policy denies {tool}", 403))
        call = ToolCall(call_id=call_id, tool=tool, arguments=arguments)
        events = call.start(needs_approval=policy.action == "require_approval")
        operation_id = operation_id_for(key)
        if call.state is CallState.RUNNING and get_tool(tool).kind is ToolKind.READ:
            finish = await self.pipeline.run_at_erp(session_id=session_id, call_id=call_id, operation_id=operation_id,
                                                    call=call, requested_by=owner)
            events += finish(call)
        async with self.uow() as uow:
            record = await uow.calls.add(call_key=key, call_id=call_id, session_id=session_id, run_id=run_id,
                                         source=source, request_hash=digest, operation_id=operation_id, call=call)
            if record is None:  # a concurrent delivery of the same command recorded it first: no second call
                return await uow.calls.get(key)
            await uow.emit(session_id, events)
            await uow.commit()
        if record.call.state is CallState.FINISHED:
            await self.pipeline.finished(record)
        return record

    async def view(self, key: str) -> dict[str, Any]:
        async with self.uow(read_only=True) as uow:
            record = await uow.calls.get(key)
        return calls.view(record, record.call)

    async def advance(self, key: str) -> None:
        """Take the call through every step that needs no person, from wherever it stands."""
        await self.pipeline.advance(key)

    # --- approval events ---------------------------------------------------------------------
    async def on_approval_requested(self, record: ApprovalRecordV1) -> None:
        """A pending approval exists for one of our calls: the first one, or an edit's new version."""
        await self.pipeline.approval_requested(record)

    async def on_approval_resolved(self, *, session_id: str, call_id: str, pending_id: str, status: str,
                                   decided_by: str | None, comment: str | None, grant: GrantV1 | None) -> None:
        if status == "superseded":
            return  # handled with the new version's approval-requested event (it carries the new pending)
        key = call_key(session_id, call_id)
        extra = {"grant": grant.model_dump(mode="json")} if grant else {}

        def resolve(call: ToolCall) -> list:
            _require_known(call, pending_id)
            if call.pending is None or (call.pending.pending_id != pending_id and pending_id not in call.resolutions):
                log.info("resolution of %s does not concern call %s now; ignored", pending_id, call.call_id)
                return []
            events = call.resolve(pending_id, status, decided_by=decided_by, comment=comment)
            if events and status == "approved":
                # The durable intent (``executing``, commit_sent_at) in the grant's own transaction: one
                # transaction fewer, and it is still committed before the commit is sent.
                events += call.begin_execution()
            return events

        approved = await self.pipeline.transition(key, resolve, commit_sent=status == "approved", **extra)
        if approved is not None and status == "approved":
            failpoint("agent.approval.after_record")  # the grant and the intent are recorded, the commit not sent
            await self.pipeline.advance(key, approved)

    # --- reconciliation ----------------------------------------------------------------------
    async def reconcile(self, record: CallRecord) -> None:
        """A commit whose answer never arrived: ask the ERP, never a person; re-send if not committed."""
        await self.pipeline.reconcile(record)


def _require_known(call: ToolCall, pending_id: str) -> None:
    """Retry later when a decision arrives before we learned of its approval.

    ``requested`` and ``resolved`` events come through separate consumers, so a fast decision on
    an edited (new) version can overtake the event that introduces it; dropping it would lose the
    decision. A finished call has nothing to wait for. (Raised under the call's lock: the
    transition's unit of work rolls back and the event is redelivered.)
    """
    known = pending_id in call.resolutions or (call.pending is not None and call.pending.pending_id == pending_id)
    if not known and call.state is not CallState.FINISHED:
        raise TransientError(f"approval {pending_id} of call {call.call_id} is not known here yet")
