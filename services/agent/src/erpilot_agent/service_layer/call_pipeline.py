"""Moving a recorded tool call forward (SPEC §3): a read or draft runs at the ERP; a write is prepared at the
ERP, and that is the agent's last step before a person decides (issue 25: the ERP asks for the approval in the
transaction that stores the prepared operation; the approval service sends the commit in the transaction that
records the decision; the agent follows their events, ``tool_calls``).

Every change of a call is one ``transition``: under the call's row lock, its state and its session events in
one unit of work. What guards which failure here:
- a crash after a write was recorded, before its prepare was sent (``agent.call.after_record``), or a prepare
  whose answer was lost: the call stays ``preparing``; the redelivered command (an external call) or the run's
  next drive (a model's call: the resumer re-drives a run left ``running``) sends the prepare again, and the
  ERP answers a repeat of the ``operation_id`` from its inbox (one operation, one approval request);
- a crash while a read or draft ran: a read is recorded only with its answer (``tool_calls``); a draft stays
  ``running`` and is sent again (``req.erp.draft`` is a core request no stream keeps, issue 31: ``broker.send``
  repeats it while unanswered, then the tool call's retry, the run's next drive or the pass over left calls),
  idempotent at the ERP by ``operation_id``, which stores it before it answers;
- the prepare's refusal (a business rule, an expired requester assertion) is recorded as the call's outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from erpilot_agent.domain.tool_calls import CallState, ToolCall
from erpilot_agent.service_layer.ports import AgentUnitOfWork, CallDownstream, CallRecord, Work
from erpilot_contracts.base import ErrorV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_platform.broker import ReplyError
from erpilot_platform.telemetry import step

log = logging.getLogger(__name__)
OnFinished = Callable[[str], Awaitable[None]]
Change = Callable[[CallRecord], list]


def call_error(error: ErrorV1) -> dict[str, Any]:
    """The call's error as recorded and shown: code and message, and the rule a refused message broke
    (``details.reason``, e.g. ``assertion_expired``: the model sees why and the user's next message continues)."""
    reason = (error.details or {}).get("reason")
    return {"code": error.code, "message": error.message, **({"details": {"reason": reason}} if reason else {})}


class CallPipeline:
    def __init__(self, uow: AgentUnitOfWork, downstream: CallDownstream, *, public_url: str,
                 on_finished: OnFinished | None = None):
        self.unit = uow
        self.downstream = downstream
        self.public_url = public_url.rstrip("/")
        self.on_finished = on_finished

    async def advance(self, record: CallRecord, *, owner: str, assertion: str | None) -> CallRecord:
        """Take the call through what needs no person (a read or draft still running, a write not yet
        prepared); the call as it stands then. ``assertion`` goes with every command to the ERP."""
        if record.call.state is CallState.RUNNING:
            change = await self.run_at_erp(session_id=record.session_id, call_id=record.call_id,
                                           operation_id=record.operation_id, call=record.call, requested_by=owner,
                                           assertion=assertion)
            return await self.transition(record.call_key, lambda r: change(r.call)) or record
        if record.call.state is CallState.PREPARING:
            with step("agent", "prepare", session_id=record.session_id, call_id=record.call_id,
                      operation_id=record.operation_id):
                return await self._prepare(record, owner, assertion)
        return record

    async def run_at_erp(self, *, session_id: str, call_id: str, operation_id: str, call: ToolCall,
                         requested_by: str, assertion: str | None) -> Callable[[ToolCall], list]:
        """Run a read or draft at the ERP; the change that records its outcome (a finish that a concurrent
        delivery of the call recorded first stands). The ERP's own failure (5xx) is raised: the command is
        retried, then dead-lettered."""
        cmd = ExecuteToolV1(session_id=session_id, call_id=call_id, operation_id=operation_id, tool=call.tool,
                            arguments=call.arguments, requested_by=requested_by, assertion=assertion)
        kind = get_tool(call.tool).kind
        try:
            result = await (self.downstream.read(cmd) if kind is ToolKind.READ else self.downstream.draft(cmd))
        except ReplyError as exc:  # the ERP answered with an error that is not a business outcome
            if exc.error.status >= 500:
                raise
            return _first_finish("failed", error=call_error(exc.error))
        if result.outcome == "succeeded":
            return _first_finish("succeeded", result=result.result)
        return _first_finish("business_rejected", error={"code": result.error.code, "message": result.error.message})

    async def _prepare(self, record: CallRecord, owner: str, assertion: str | None) -> CallRecord:
        """Ask the ERP to prepare the write. Prepared: nothing more here (the ERP's outbox asks for the approval,
        whose ``evt.approval.requested`` shows it). Refused: the call ends with that refusal."""
        tool, arguments = record.call.tool, record.call.arguments
        spec = get_tool(tool)
        policy = await self.downstream.policy(tool)
        try:
            await self.downstream.prepare(PrepareOperationV1(
                operation_id=record.operation_id, session_id=record.session_id, call_id=record.call_id, tool=tool,
                tool_schema_version=spec.schema_version, arguments=arguments,
                fingerprint=fingerprint(tool, spec.schema_version, arguments), requested_by=owner,
                stock_check=policy.stock_check, assertion=assertion, agent_reason=record.call.reason))
        except ReplyError as exc:
            # A refused message (no valid requester assertion) or the ERP's own failure is no business outcome.
            failed = exc.error.code == "invalid_message" or exc.error.status >= 500
            error = call_error(exc.error)
            return await self.transition(record.call_key, lambda r: _if_preparing(
                r.call, "failed" if failed else "business_rejected", error=error)) or record
        return record

    # --- the one way a call changes ------------------------------------------------------------
    async def transition(self, key: str, change: Change, *, operation_id: str | None = None) -> CallRecord | None:
        """Apply one lifecycle transition under the call's row lock, with its events, in one unit of work; the
        call as it stands after it (None: no such call). ``change`` may raise (e.g. ``TransientError``: not
        yet), and then nothing is stored."""
        async def work(unit: Work) -> tuple[CallRecord | None, bool]:
            record = await unit.calls.get(key, lock=True)
            if record is None:
                return None, False
            events = change(record)
            if not events:
                return record, False
            return await unit.calls.save(key, record.call, events=events, operation_id=operation_id), True

        record, changed = await self.unit.run(work)
        if record is None:
            log.warning("event for unknown call %s ignored", key)
        elif changed and record.call.state is CallState.FINISHED:
            await self.finished(record)
        return record

    async def finished(self, record: CallRecord) -> None:
        """Tell the run driver; only a model's call can have a run waiting for it."""
        if record.source == "model" and self.on_finished:
            await self.on_finished(record.call_key)


def _if_preparing(call: ToolCall, outcome: str, **detail: Any) -> list:
    """End a write whose prepare was refused, unless it moved on meanwhile (``evt.approval.request_refused``
    ended it, or a repeat's refusal came after the first prepare's approval was recorded): that stands."""
    if call.state is not CallState.PREPARING:
        log.info("call %s is %s; the refusal of its prepare changes nothing", call.call_id, call.state)
        return []
    return call.finish(outcome, **detail)


def _first_finish(outcome: str, **detail: Any) -> Callable[[ToolCall], list]:
    """Finish a read or draft unless a concurrent delivery of the call finished it first (that result stands)."""
    return lambda call: [] if call.state is CallState.FINISHED else call.finish(outcome, **detail)
