"""Runs: a user message starts one; the model loop drives it to an answer, through tool calls and
durable waits for approvals.

Driving a run (``drive``) happens under a per-session lock, so one process at a time moves it, and
each step (``run_steps``: ask the model, or run the calls it asked for) starts from what is stored.
When a write waits for a person the run is ``waiting`` and the driver lets go; when that call finishes
(``on_call_finished``, in whichever replica sees it), the run is driven again.

A crash anywhere leaves a run that ``resume_stale`` picks up: the stored history says what is next,
and a stored call id is never issued as a new call (the pipeline is idempotent by ``call_id``). A step
that keeps failing otherwise (a downstream away, the ERP answering 5xx) is retried by the resumer
within a ``RetryBudget``; when that is spent the run fails with ``retries_exhausted``, naming the last
error. Its calls keep whatever state they reached (nothing is claimed to have happened or not).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from erpilot_agent.domain.prompt import SYSTEM_PROMPT
from erpilot_agent.domain.runs import MAX_STEPS, RETRIES_EXHAUSTED, AskModel, Finish, RetryBudget, RunCalls, next_action
from erpilot_agent.service_layer.ports import AgentUnitOfWork, DriverLocks
from erpilot_agent.service_layer.run_ports import Tools
from erpilot_agent.service_layer.run_records import Clock, RunRecords, utc_now
from erpilot_agent.service_layer.run_steps import RunSteps
from erpilot_contracts.agent.v1 import CancelledRunV1, CancelRunV1, PostMessageV1, RunRefV1
from erpilot_platform.logs import bind, unbind
from erpilot_platform.loops import Soon, every

log = logging.getLogger(__name__)


class RunService:
    def __init__(self, uow: AgentUnitOfWork, locks: DriverLocks, tools: Tools, model: Any, *,
                 tool_specs: list[dict[str, Any]], budget_tokens: int, tool_bytes: int, max_steps: int = MAX_STEPS,
                 system_prompt: str = SYSTEM_PROMPT, max_concurrent_runs: int = 8,
                 retry: RetryBudget | None = None, clock: Clock = utc_now):
        self.store = RunRecords(uow, clock=clock)
        self.locks = locks
        self.max_steps = max_steps
        self.steps = RunSteps(self.store, tools, model, tool_specs=tool_specs, budget_tokens=budget_tokens,
                              tool_bytes=tool_bytes, max_steps=max_steps, system_prompt=system_prompt)
        self.retry = retry or RetryBudget()
        self._tasks: dict[str, asyncio.Task] = {}
        self._again: set[str] = set()
        # Set when a run could not be driven here (it stays "running", its retry due after a back-off): the
        # resumer, which otherwise looks rarely when no run is running, looks again at once.
        self.drive_failed = asyncio.Event()
        # A driven run holds a database connection (its lock) and may wait on the model: bound how
        # many this process drives at once, so the pool always has connections for everything else.
        self._slots = asyncio.Semaphore(max_concurrent_runs)

    # --- entry points ------------------------------------------------------------------------
    async def post_message(self, cmd: PostMessageV1) -> RunRefV1:
        """Start a run for the message (idempotent by ``message_id``) and drive it in the background. The run
        keeps the message's requester assertion for every call it makes, under the gateway's run id, which that
        assertion is bound to. Raises ``Refused``."""
        run_id, _created = await self.store.start_run(session_id=cmd.session_id, owner=cmd.owner,
                                                      message_id=cmd.message_id, text=cmd.text,
                                                      assertion=cmd.assertion, run_id=cmd.run_id)
        self.schedule(run_id)
        return RunRefV1(run_id=run_id)

    async def cancel(self, cmd: CancelRunV1) -> CancelledRunV1:
        """Cancel a waiting run: it takes no further step. The cancel records ``evt.agent.run_cancelled``, from
        which (and only from which) the approval service withdraws the run's approvals; the pending ids
        answered let the gateway report each one's status. Raises ``Refused``."""
        pending_ids = await self.store.cancel(session_id=cmd.session_id, owner=cmd.owner, run_id=cmd.run_id,
                                              assertion=cmd.assertion)
        return CancelledRunV1(run_id=cmd.run_id, pending_ids=pending_ids)

    async def on_call_finished(self, call_key: str) -> None:
        """A tool call finished: if a model run waits for it, drive that run on."""
        try:
            run_id = await self.store.run_of_call(call_key)
        except Exception:  # the resumer finds the run anyway; never fail the call's own transition
            log.warning("could not look up the run of call %s", call_key, exc_info=True)
            return
        if run_id is not None:
            self.schedule(run_id)

    async def resume_stale(self, *, stale_seconds: float) -> int:
        """Drive runs nobody is driving: left ``running`` by a crash, or waiting on calls that finished."""
        run_ids = await self.store.runs_to_resume(stale_seconds=stale_seconds)
        for run_id in run_ids:
            self.schedule(run_id)
        return len(run_ids)

    # --- scheduling ----------------------------------------------------------------------------
    def schedule(self, run_id: str) -> None:
        """Drive the run in the background; if it is already being driven here, drive it once more after."""
        task = self._tasks.get(run_id)
        if task is not None and not task.done():
            self._again.add(run_id)
            return
        self._tasks[run_id] = asyncio.create_task(self._drive_task(run_id), name=f"run:{run_id}")

    async def _drive_task(self, run_id: str) -> None:
        try:
            while True:
                self._again.discard(run_id)
                try:
                    await self.drive(run_id)
                except Exception:  # e.g. the database is away: the resumer tries again later
                    log.warning("run %s could not be driven now", run_id, exc_info=True)
                    self.drive_failed.set()
                    return
                if run_id not in self._again:
                    return
        finally:
            self._tasks.pop(run_id, None)

    async def wait_idle(self) -> None:
        """Wait until no run is being driven by this process (tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def cancel_all(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- driving -------------------------------------------------------------------------------
    async def drive(self, run_id: str) -> None:
        """Move the run as far as it goes now. Safe to call any time, from any replica, any number of times."""
        token = bind(run_id=run_id)
        try:
            async with self._slots:
                await self._drive(run_id)
        finally:
            unbind(token)

    async def _drive(self, run_id: str) -> None:
        while True:
            run = await self.store.get_run(run_id)
            if run is None or not run.active:
                return
            async with self.locks.hold(run.session_id) as held:
                if not held:
                    return  # another driver has it; it re-checks after letting go
                try:
                    await self._steps(run_id)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    # Downstream away, database hiccup, or a bug: nothing is half done (every step
                    # starts from what is stored), so a later attempt continues from here.
                    log.warning("run %s could not advance now; it will be resumed", run_id, exc_info=True)
                    self.drive_failed.set()
                    await self._failed_attempt(run_id, exc)
                    return
            # A call may have finished while we held the lock (its hook could not take it).
            if not await self.store.resumable(run_id):
                return

    async def _failed_attempt(self, run_id: str, exc: Exception) -> None:
        """Count the failed attempt (it delays the next one); fail the run once its budget is spent."""
        try:
            attempts, failing_seconds = await self.store.note_failure(run_id)
            reason = self.retry.exhausted(attempts, failing_seconds)
            if reason is not None:
                log.error("run %s: %s", run_id, reason)
                await self.store.fail(run_id, RETRIES_EXHAUSTED, f"{reason}; last error: {_short(exc)}")
        except Exception:  # the database may be what is away: the resumer comes back anyway
            log.debug("could not record the failed attempt of run %s", run_id, exc_info=True)

    async def _steps(self, run_id: str) -> None:
        # Each model request is a step and max_steps bounds them; the factor leaves room for the
        # tool rounds between them (the guard only stops a bug from spinning).
        for _ in range(4 * self.max_steps + 4):
            snapshot = await self.store.load(run_id)
            if snapshot is None or not snapshot.run.active:
                return
            action = next_action(snapshot.history, run_id)
            if isinstance(action, Finish):
                await self.store.finish(run_id)
                return
            if isinstance(action, RunCalls):
                if not await self.steps.run_calls(snapshot, action.calls):
                    return  # waiting for a person
                continue
            assert isinstance(action, AskModel)
            if not await self.steps.ask_model(snapshot):
                return
        raise RuntimeError(f"run {run_id} made no progress")

def _short(exc: Exception, limit: int = 300) -> str:
    text = repr(exc)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# While a run is ``running`` somewhere (driven, or left so by a crash or a failed attempt, whose retry is due
# after a back-off) the resumer looks every RESUMER_ACTIVE_SECONDS, as it always did. Otherwise a run needs it
# only when its drive failed here (``drive_failed`` wakes it) or a replica died with a run in hand; a new run
# and a run whose calls finished are driven at once by ``post_message`` and the calls' finish hook. So with
# no run running, once per RESUMER_IDLE_SECONDS is enough (issue 13: an idle stack looked every second; a
# replica that restarts resumes its runs at once). Waking it on every commit instead cost two reads each.
RESUMER_ACTIVE_SECONDS = 1.0
RESUMER_IDLE_SECONDS = 30.0


async def resume_pass(service: RunService, *, stale_seconds: float) -> Soon | None:
    """One look of the resumer; ``Soon`` while a run is running anywhere, else None (the idle interval)."""
    if await service.resume_stale(stale_seconds=stale_seconds) or await service.store.has_running_runs():
        return Soon(RESUMER_ACTIVE_SECONDS)
    return None


async def run_resumer(service: RunService, *, stale_seconds: float, interval: float = RESUMER_IDLE_SECONDS
                      ) -> None:
    """Background loop: resume runs that nobody drives (crash, lost hook). Stops their tasks on exit."""
    try:
        await every(interval, lambda: resume_pass(service, stale_seconds=stale_seconds),
                    wake=service.drive_failed, name="run resumer pass")
    finally:
        await service.cancel_all()
