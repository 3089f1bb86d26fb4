"""Tool calls (SPEC §3): a command starts one (validate → record → as far as it goes without a person,
``call_pipeline``); the events of the approval service and the ERP move a write on from there.

A call is its session's ``call_id`` (fixed before the command's first publish); everything here keys on the
derived ``call_key``, and ``operation_id`` derives from it (``domain.call_identity``), so every delivery of one
command, even concurrent ones in two replicas, finds or creates the same single call.

After its prepare a write is the ERP's and the approval service's (issue 25); the agent follows their events,
each recorded once under the call's row lock (a redelivery finds the transition done and changes nothing):
- ``evt.approval.requested``: ``approval_pending`` (an edit: ``approval_resolved`` superseded and the new one);
- ``evt.approval.request_refused``: the approval service stored nothing; the call ends ``failed``;
- ``evt.approval.resolved``: approved → ``approval_resolved`` and ``tool_executing`` in one transaction (the
  commit left the approval service's outbox with the decision; there is nothing for the agent to send, so no
  grant, intent or reconciler here); any other status → ``tool_finished`` ``not_executed``;
- ``evt.erp.operation_finished``: ``tool_finished`` succeeded | business_rejected. It is a durable event: a
  crash before it is recorded (``agent.commit.after_send``) leaves it unacknowledged and it comes again.
Events travel through separate consumers and may overtake each other: a decision on an approval the call does
not know yet, or an outcome before the call's decision, raises ``TransientError`` (retried later), so the
session's events keep their order (``approval_pending`` → ``approval_resolved`` → ``tool_executing`` →
``tool_finished``).
"""

from __future__ import annotations

import hashlib
import logging
from functools import partial
from typing import Any

import rfc8785

from erpilot_agent.domain.call_identity import call_key, operation_id_for
from erpilot_agent.domain.tool_calls import CallState, PendingApproval, ToolCall
from erpilot_agent.service_layer import views
from erpilot_agent.service_layer.call_pipeline import CallPipeline, OnFinished, call_error
from erpilot_agent.service_layer.ports import AgentUnitOfWork, CallDownstream, CallRecord, Work
from erpilot_contracts.agent.v1 import ToolCallViewV1
from erpilot_contracts.approval.v1 import ApprovalRecordV1, ApprovalRequestRefusedV1, ApprovalResolvedV1
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_platform.broker import TransientError
from erpilot_platform.failpoints import failpoint
from erpilot_platform.idempotency import Decision, decide, request_digest
from erpilot_platform.logs import bind, unbind
from erpilot_platform.loops import every
from erpilot_platform.refusals import Refused
from erpilot_platform.tool_arguments import normalised_arguments

__all__ = ["ToolCallService", "drive_left_calls_forever", "request_hash"]
log = logging.getLogger(__name__)


def request_hash(tool: str, arguments: Any) -> str:
    """What a ``call_id`` was used for, as the call row stores it (``erpilot_platform.idempotency``)."""
    return request_digest({"tool": tool, "arguments": arguments})


def legacy_request_hash(tool: str, arguments: Any) -> str:
    """The unversioned ``sha256:<hex>`` call rows stored before ``request_hash``: a retry of such a call
    after the upgrade is still its repeat."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps({"tool": tool, "arguments": arguments})).hexdigest()


class ToolCallService:
    def __init__(self, uow: AgentUnitOfWork, downstream: CallDownstream, *, public_url: str,
                 on_finished: OnFinished | None = None):
        self.unit = uow
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
    async def start(self, *, session_id: str, owner: str, tool: str, raw_arguments: Any, call_id: str,
                    assertion: str | None = None, source: str = "external",
                    run_id: str | None = None, reason: str | None = None) -> ToolCallViewV1:
        """Validate, record and drive one call as far as it goes without a person; returns its view.

        Idempotent by (``session_id``, ``call_id``): the same tool and arguments again get the same call's view;
        other ones 409 ``idempotency_conflict``. Other sessions' calls are never looked at. ``assertion`` (the
        command's, or its run's) is stored with a new call and forwarded unchanged in its ERP commands, and so is
        ``reason`` (a write's, for the approver; the first delivery's stands: it is not part of the request).
        """
        key = call_key(session_id, call_id)
        token = bind(session_id=session_id, call_id=call_id)
        try:
            digest = request_hash(tool, raw_arguments)

            async def look(unit: Work) -> CallRecord | None:
                session = await unit.sessions.get(session_id)
                if session is None or session.owner != owner:
                    raise Refused("not_found", f"session {session_id} not found", 404)
                return await unit.calls.get(key)

            existing = await self.unit.read(look)
            if existing is None:
                existing = await self._record_new(key, session_id, call_id, tool, raw_arguments, digest, owner,
                                                  assertion, source, run_id, reason)
            legacy = partial(legacy_request_hash, tool, raw_arguments)
            if decide(existing.request_hash, digest, legacy=legacy) is Decision.CONFLICT:
                # also when a concurrent delivery of another request recorded the call first
                raise Refused("idempotency_conflict", f"call_id {call_id} was used with another request", 409)
            # A repeat of the command brings its own (fresher) assertion; a model's call has its run's.
            current = await self.pipeline.advance(existing, owner=owner, assertion=assertion or existing.assertion)
            return views.call_view(current)
        finally:
            unbind(token)

    async def _record_new(self, key: str, session_id: str, call_id: str, tool: str, raw_arguments: Any, digest: str,
                          owner: str, assertion: str | None, source: str, run_id: str | None,
                          reason: str | None = None) -> CallRecord:
        """Record the new call; the recorded one (a concurrent delivery's, if that one was first).

        A read has no effect to make exactly once, so it runs before anything is recorded and is recorded
        once, finished, with its events in the same transaction (a crash before that commit leaves nothing:
        the redelivered command reads again). Every other call is recorded first and then driven by ``advance``.
        """
        arguments = normalised_arguments(tool, raw_arguments)
        policy = await self.downstream.policy(tool)
        if policy.action == "deny":
            raise Refused("policy_denied", f"the policy denies {tool}", 403)
        call = ToolCall(call_id=call_id, tool=tool, arguments=arguments, reason=reason)
        events = call.start(needs_approval=policy.action == "require_approval")
        operation_id = operation_id_for(key)
        if call.state is CallState.RUNNING and get_tool(tool).kind is ToolKind.READ:
            finish = await self.pipeline.run_at_erp(session_id=session_id, call_id=call_id, operation_id=operation_id,
                                                    call=call, requested_by=owner, assertion=assertion)
            events += finish(call)

        async def record(unit: Work) -> tuple[CallRecord, bool]:
            added = await unit.calls.add(call_key=key, call_id=call_id, session_id=session_id, run_id=run_id,
                                         source=source, request_hash=digest, operation_id=operation_id,
                                         assertion=assertion, call=call)
            if added is None:  # a concurrent delivery of the same command recorded it first: no second call
                return await unit.calls.get(key), False
            await unit.sessions.append(session_id, events)
            return added, True

        recorded, new = await self.unit.run(record)
        if new and recorded.call.state is CallState.PREPARING:
            failpoint("agent.call.after_record")  # the write and its tool_started are stored, the prepare not sent
        if new and recorded.call.state is CallState.FINISHED:
            await self.pipeline.finished(recorded)
        return recorded

    async def drive_left_calls(self, *, untouched_for_seconds: float = 0.0) -> int:
        """Drive on every external call its request's handler left (it died, or gave up on the ERP, after storing
        the call, before the call went as far as it goes without a person) and nothing changed for
        ``untouched_for_seconds``; how many were driven. ``req.agent.tool_call`` is a core request that no stream
        redelivers (issue 31), so the agent does this itself (``drive_left_calls_forever``). Driving a call that a
        request's handler is driving too is harmless: each step is idempotent (the ERP keys on ``operation_id``)."""
        async def look(w: Work) -> list[tuple[CallRecord, str]]:
            left = await w.calls.left_by_their_request(untouched_for_seconds=untouched_for_seconds)
            owners = {r.session_id: (await w.sessions.get(r.session_id)).owner for r in left}
            return [(r, owners[r.session_id]) for r in left]

        driven = 0
        for record, owner in await self.unit.read(look):
            token = bind(session_id=record.session_id, call_id=record.call_id)
            try:
                await self.pipeline.advance(record, owner=owner, assertion=record.assertion)
                driven += 1
            except Exception:  # the next start, or the sender's retry with the same key, drives it
                log.warning("call %s left by its request could not be driven now", record.call_id, exc_info=True)
            finally:
                unbind(token)
        if driven:
            log.info("drove on %d tool call(s) left by their request", driven)
        return driven

    async def view(self, key: str) -> ToolCallViewV1:
        async def look(unit: Work) -> CallRecord | None:
            return await unit.calls.get(key)

        return views.call_view(await self.unit.read(look))

    # --- the approval service's and the ERP's events ----------------------------------------------
    async def on_approval_requested(self, record: ApprovalRecordV1) -> None:
        """A pending approval exists for one of our calls: the first one, or an edit's new version."""
        self.downstream.policy_version_seen(record.policy_version)  # a new policy: ask for it again
        pending = PendingApproval(
            pending_id=record.pending_id, fingerprint=record.fingerprint, expires_at=record.expires_at,
            # The domain keeps the preview's JSON; the call's views read it back into PreviewV1.
            preview=record.preview.model_dump(mode="json"),
            approval_url=f"{self.pipeline.public_url}/resume/{record.pending_id}",
            edited_by=record.edited_by)

        def apply(current: CallRecord) -> list:
            call = current.call
            if record.supersedes and call.pending and call.pending.pending_id == record.supersedes:
                # The old version ended by the edit of the person who made the new one, not the requester.
                events = call.supersede(record.supersedes, pending, decided_by=record.edited_by)
                call.arguments = record.arguments  # an edit brings new arguments (and a new operation id)
                return events
            return call.await_approval(pending)

        await self.pipeline.transition(call_key(record.session_id, record.call_id), apply,
                                       operation_id=record.operation_id if record.supersedes else None)

    async def on_approval_resolved(self, evt: ApprovalResolvedV1) -> None:
        """An approval left ``pending``: approved (the call is executing), or it ends not executed."""
        if evt.status == "superseded":
            return  # told with the new version's approval-requested event (it carries the new pending)

        def resolve(current: CallRecord) -> list:
            call = current.call
            _require_known(call, evt.pending_id)
            if call.pending is None or (call.pending.pending_id != evt.pending_id
                                        and evt.pending_id not in call.resolutions):
                log.info("resolution of %s does not concern call %s now; ignored", evt.pending_id, call.call_id)
                return []
            return call.resolve(evt.pending_id, evt.status, decided_by=evt.decided_by, comment=evt.comment,
                                on_behalf_of=evt.decided_on_behalf_of)

        await self.pipeline.transition(call_key(evt.session_id, evt.call_id), resolve)

    async def on_operation_finished(self, evt: OperationStatusV1) -> None:
        """The ERP committed or rejected an approved operation: the call's outcome."""
        if evt.session_id is None or evt.call_id is None or evt.status == "prepared":
            log.warning("operation %s finished without a call to tell (%s); ignored", evt.operation_id, evt.status)
            return
        failpoint("agent.commit.after_send")  # the commit's outcome reached the agent, not recorded yet

        def record_outcome(current: CallRecord) -> list:
            call = current.call
            if call.awaits_decision:  # the outcome overtook the decision: record that first, this after it
                raise TransientError(f"operation {evt.operation_id} finished before the decision on call "
                                     f"{call.call_id} was recorded here")
            if current.operation_id != evt.operation_id:
                log.warning("call %s is operation %s, not %s: that outcome changes nothing", call.call_id,
                            current.operation_id, evt.operation_id)
                return []
            if call.state is CallState.FINISHED:  # a redelivery: recorded already
                if call.outcome != _outcome(evt):
                    log.warning("call %s ended %s; operation %s says %s", call.call_id, call.outcome,
                                evt.operation_id, evt.status)
                return []
            if evt.status == "committed":
                return call.finish("succeeded", result=evt.result or {})
            error = call_error(evt.error) if evt.error else {"code": "rejected", "message": "the ledger rejected it"}
            return call.finish("business_rejected", error=error)

        await self.pipeline.transition(call_key(evt.session_id, evt.call_id), record_outcome)

    async def on_request_refused(self, evt: ApprovalRequestRefusedV1) -> None:
        """The approval service refused the ERP's request (nothing pending): the write will not be executed."""
        def refuse(current: CallRecord) -> list:
            call = current.call
            if current.operation_id != evt.operation_id or call.state is not CallState.PREPARING:
                # An edit's refused version (the call still waits for its current one), or already ended.
                log.info("refusal of operation %s changes nothing for call %s (%s)", evt.operation_id,
                         call.call_id, call.state)
                return []
            return call.finish("failed", error=call_error(evt.error))

        await self.pipeline.transition(call_key(evt.session_id, evt.call_id), refuse)


# After the pass at start (every call left), a pass every LEFT_CALLS_SECONDS over the calls untouched that long: a
# request whose handler gave up on the ERP (503) and whose client never sent it again still goes on.
LEFT_CALLS_SECONDS = 30.0


async def drive_left_calls_forever(service: ToolCallService, *, interval: float = LEFT_CALLS_SECONDS) -> None:
    """Background loop of the agent: the calls a dead process left, at once; then those left untouched."""
    try:
        await service.drive_left_calls()
    except Exception:  # the database may be away: the next pass (or the sender's retry) drives them
        log.warning("could not look for tool calls left by their request", exc_info=True)
    await every(interval, lambda: service.drive_left_calls(untouched_for_seconds=interval),
                name="left tool calls pass")


def _outcome(evt: OperationStatusV1) -> str:
    return "succeeded" if evt.status == "committed" else "business_rejected"


def _require_known(call: ToolCall, pending_id: str) -> None:
    """Retry later when a decision arrives before we learned of its approval.

    ``requested`` and ``resolved`` events come through separate consumers, so a fast decision on an edited
    (new) version can overtake the event that introduces it; dropping it would lose the decision. A finished
    call has nothing to wait for. (Raised under the call's lock: the transition rolls back and the event is
    redelivered.)
    """
    known = pending_id in call.resolutions or (call.pending is not None and call.pending.pending_id == pending_id)
    if not known and call.state is not CallState.FINISHED:
        raise TransientError(f"approval {pending_id} of call {call.call_id} is not known here yet")
