"""What a run stores, each step one unit of work (issue 27): starting a run, the model's replies and the tool
results with their session events, ending, failed attempts, cancelling; and the looks the driver and the
resumer take. The rules are the domain's (``domain.run_state``) and this module's; the repositories only read
and write rows.

Every write locks the session first (``sessions.get(lock=True)``), the same lock a call's transition takes, so
history positions and event ``seq`` numbers are allocated in one order; a run that is no longer active records
nothing more (a driver that was mid-step when its run was cancelled or ended).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from erpilot_agent.domain.history import Entry, tool_message, user_message
from erpilot_agent.domain.run_state import Run, RunRefusal, start_refusal
from erpilot_agent.domain.runs import StoredEntry, answered_call_ids
from erpilot_agent.domain.tool_calls import CallState, SessionEvent
from erpilot_agent.service_layer.ports import AgentUnitOfWork, Work
from erpilot_agent.service_layer.run_ports import RunSnapshot, ToolResult
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.subjects import AGENT_EVT_RUN_CANCELLED
from erpilot_platform.refusals import Refused

log = logging.getLogger(__name__)
RETRY_DELAY_MAX_SECONDS = 60.0  # the longest wait between two attempts of a failing run
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def refused(refusal: RunRefusal) -> Refused:
    return Refused(refusal.code, refusal.message, refusal.status, **refusal.details)


class RunRecords:
    def __init__(self, uow: AgentUnitOfWork, *, clock: Clock = utc_now):
        self.unit = uow
        self.clock = clock

    # --- starting and cancelling ---------------------------------------------------------------
    async def start_run(self, *, session_id: str, owner: str, message_id: str, text: str,
                        assertion: str | None = None, run_id: str | None = None) -> tuple[str, bool]:
        """Record the user message and a new run; (run_id, created). Idempotent by ``message_id``; raises
        ``Refused`` (unknown session, another text under the id, a run of the session working). ``run_id`` is
        the gateway's (its assertion covers that run's calls only); a new one when none is given."""
        run_id = run_id or f"run_{uuid.uuid4().hex}"

        async def work(unit: Work) -> tuple[str, bool]:
            session = await unit.sessions.get(session_id, lock=True)
            if session is None or session.owner != owner:
                raise Refused("not_found", f"session {session_id} not found", 404)
            earlier = await unit.runs.by_message(session_id, message_id)
            if earlier is not None:
                if _message_text(await unit.runs.history(session_id), earlier.run_id) != text:
                    raise Refused("idempotency_conflict", f"message {message_id} was posted with another text", 409)
                return earlier.run_id, False
            if (refusal := start_refusal(await unit.runs.working(session_id))) is not None:
                raise refused(refusal)
            await unit.runs.add(Run(run_id=run_id, session_id=session_id, owner=owner, status="running",
                                    message_id=message_id, assertion=assertion))
            await unit.sessions.set_active_run(session_id, run_id)
            await unit.runs.append_history(session_id, run_id, [user_message(text)])
            await unit.sessions.append(session_id, [SessionEvent("message", {"role": "user", "text": text,
                                                                             "run_id": run_id}),
                                                    SessionEvent("run_started", {"run_id": run_id})])
            return run_id, True

        return await self.unit.run(work)

    async def cancel(self, *, session_id: str, owner: str, run_id: str, assertion: str | None = None) -> list[str]:
        """Cancel a waiting run (idempotent); the pending ids of its calls still awaiting a decision. The cancel
        records ``evt.agent.run_cancelled`` (with the cancel's ``assertion``) in its own transaction: the approval
        service withdraws those approvals from it, whoever asked and whatever crashes after. Raises ``Refused``
        (unknown run, a run actively working, a run already over)."""
        async def work(unit: Work) -> list[str]:
            session = await unit.sessions.get(session_id, lock=True)
            run = await unit.runs.get(run_id)
            if session is None or session.owner != owner or run is None or run.session_id != session_id:
                raise Refused("not_found", f"run {run_id} not found", 404)
            now = self.clock()
            try:
                events = run.cancel(now)
            except RunRefusal as refusal:
                raise refused(refusal) from None
            # A write being prepared has no approval yet; its call id is named all the same.
            undecided = await unit.calls.undecided_in_run(session_id, run_id)
            if events:
                await unit.runs.save(run)
                await unit.sessions.set_active_run(session_id, None, if_active=run_id)
                await unit.sessions.append(session_id, events)
                await unit.emit(AGENT_EVT_RUN_CANCELLED, RunCancelledV1(
                    session_id=session_id, run_id=run_id, owner=owner, call_ids=[c.call_id for c in undecided],
                    cancelled_at=now, assertion=assertion), msg_id=f"run_cancelled:{run_id}")
            return [c.call.pending.pending_id for c in undecided
                    if c.call.state is CallState.AWAITING_APPROVAL and c.call.pending is not None]

        return await self.unit.run(work)

    # --- the driver's steps --------------------------------------------------------------------
    async def record_reply(self, run_id: str, entry: Entry) -> None:
        """Store the assistant entry (one more step); without tool calls it also finishes the run."""
        async def work(unit: Work) -> None:
            run = await _locked_active(unit, run_id)
            if run is None:
                return
            await unit.runs.append_history(run.session_id, run_id, [entry])
            events = run.replied(entry.get("content"), final=not entry.get("tool_calls"), now=self.clock())
            await self._store(unit, run, events)

        await self.unit.run(work)

    async def record_results(self, run_id: str, results: list[ToolResult], *, waiting: bool) -> None:
        """Store tool results (each once, whoever got here first); the run then waits for a person or goes on.
        A call the agent refused to start gets its ``tool_started`` and ``tool_finished`` here."""
        async def work(unit: Work) -> None:
            run = await _locked_active(unit, run_id)
            if run is None:
                return
            answered = answered_call_ids(await unit.runs.history(run.session_id))
            fresh = [result for result in results if result.call_id not in answered]
            await unit.runs.append_history(run.session_id, run_id,
                                           [tool_message(result.call_id, result.content) for result in fresh])
            run.results_stored(fresh=bool(fresh), waiting=waiting, now=self.clock())
            await unit.runs.save(run)
            await unit.sessions.append(run.session_id, [event for result in fresh if result.rejected is not None
                                                        for event in _refused_call_events(result)])

        await self.unit.run(work)

    async def finish(self, run_id: str) -> None:
        await self._end(run_id, "finished", None)

    async def fail(self, run_id: str, code: str, message: str) -> None:
        await self._end(run_id, "failed", {"code": code, "message": message})

    async def _end(self, run_id: str, status: str, error: dict[str, str] | None) -> None:
        async def work(unit: Work) -> None:
            run = await _locked_active(unit, run_id)
            if run is not None:
                await self._store(unit, run, run.end(status, error, self.clock()))

        await self.unit.run(work)

    async def note_failure(self, run_id: str) -> tuple[int, float]:
        """Count a failed attempt (it also delays the next recovery attempt): (failed attempts in a row,
        seconds since the first of them); (0, 0.0) for a run no longer active."""
        async def work(unit: Work) -> tuple[int, float]:
            run = await _locked_active(unit, run_id)
            if run is None:
                return 0, 0.0
            counted = run.failed_attempt(self.clock())
            await unit.runs.save(run)
            return counted

        return await self.unit.run(work)

    @staticmethod
    async def _store(unit: Work, run: Run, events: list[SessionEvent]) -> None:
        await unit.runs.save(run)
        if not run.active:
            await unit.sessions.set_active_run(run.session_id, None, if_active=run.run_id)
        await unit.sessions.append(run.session_id, events)

    # --- looks ---------------------------------------------------------------------------------
    async def get_run(self, run_id: str) -> Run | None:
        async def look(unit: Work) -> Run | None:
            return await unit.runs.get(run_id)

        return await self.unit.read(look)

    async def load(self, run_id: str) -> RunSnapshot | None:
        async def look(unit: Work) -> RunSnapshot | None:
            run = await unit.runs.get(run_id)
            return RunSnapshot(run, await unit.runs.history(run.session_id)) if run is not None else None

        return await self.unit.read(look)

    async def resumable(self, run_id: str) -> bool:
        """The run waits, but none of its calls is still being prepared, with a person or committing."""
        async def look(unit: Work) -> bool:
            return await unit.runs.resumable(run_id)

        return await self.unit.read(look)

    async def runs_to_resume(self, *, stale_seconds: float) -> list[str]:
        async def look(unit: Work) -> list[str]:
            return await unit.runs.due(now=self.clock(), stale_seconds=stale_seconds,
                                       max_delay_seconds=RETRY_DELAY_MAX_SECONDS)

        return await self.unit.read(look)

    async def has_running_runs(self) -> bool:
        """Some run anywhere is ``running``: being driven, or left so by a crash or a failed attempt."""
        async def look(unit: Work) -> bool:
            return await unit.runs.any_running()

        return await self.unit.read(look)

    async def run_of_call(self, call_key: str) -> str | None:
        """The run a model's tool call (by its ``call_key``) belongs to (None for external calls)."""
        async def look(unit: Work) -> str | None:
            record = await unit.calls.get(call_key)
            return record.run_id if record is not None and record.source == "model" else None

        return await self.unit.read(look)


async def _locked_active(unit: Work, run_id: str) -> Run | None:
    """Lock the run's session (history and event order), then the run as it is now if it is still active."""
    run = await unit.runs.get(run_id)
    if run is None:
        return None
    await unit.sessions.get(run.session_id, lock=True)
    run = await unit.runs.get(run_id)
    if run is None or not run.active:
        log.info("run %s is %s; nothing recorded", run_id, run.status if run else "gone")
        return None
    return run


def _message_text(history: list[StoredEntry], run_id: str) -> str | None:
    return next((item.entry.get("content") for item in history
                 if item.run_id == run_id and item.entry.get("role") == "user"), None)


def _refused_call_events(result: ToolResult) -> list[SessionEvent]:
    """``tool_started`` and ``tool_finished`` of a call the agent refused to start (it was never recorded)."""
    tool, arguments = result.rejected
    outcome = "not_executed" if result.content.get("status") == "not_executed" else "failed"
    error: dict[str, Any] = result.content.get("error") or {"code": result.content.get("reason"),
                                                            "message": result.content.get("message")}
    return [SessionEvent("tool_started", {"call_id": result.call_id, "tool": tool, "arguments": arguments}),
            SessionEvent("tool_finished", {"call_id": result.call_id, "outcome": outcome,
                                           "error": {"code": error.get("code"), "message": error.get("message")}})]
