"""A run's record and the rules of its lifecycle, as transitions that return the session events to append
(plain Python, no I/O; the service layer stores the run and its events in one unit of work).

    running <-> waiting                 (the run stores a model reply or tool results; it waits for a person)
    running | waiting -> finished       (the model answered without tool calls)
    running | waiting -> failed         (model error, context overflow, max steps, retries exhausted)
    waiting -> cancelled                (its owner cancelled it; a working run cannot be cancelled)

A run that is no longer ``running`` or ``waiting`` takes no further step: a driver that was mid-step when it
ended records nothing more. Refusals are ``RunRefusal`` (the service layer answers them as such).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from erpilot_agent.domain.tool_calls import SessionEvent

ACTIVE = ("running", "waiting")
CANCELLED = "cancelled"  # a run its owner cancelled while it waited; it takes no further step
# A waiting run may go on once none of its calls is still being prepared, with a person or committing.
BLOCKING_CALL_STATES = ("preparing", "awaiting_approval", "executing")


class RunRefusal(Exception):
    """The run cannot do what was asked (``code`` and ``status`` as the API answers them); nothing changed."""

    def __init__(self, code: str, message: str, status: int, **details: Any):
        super().__init__(message)
        self.code, self.message, self.status, self.details = code, message, status, details


@dataclass
class Run:
    """One run of the model in a session, as stored (``owner`` is the session's)."""

    run_id: str
    session_id: str
    owner: str
    status: str
    message_id: str | None = None
    steps: int = 0
    error: dict[str, Any] | None = None
    failed_attempts: int = 0  # failed attempts in a row (the RetryBudget), since failing_since
    failing_since: datetime | None = None
    assertion: str | None = None  # the requester assertion of the message that started it
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def _event(self, event_type: str, **data: Any) -> SessionEvent:
        return SessionEvent(event_type, {"run_id": self.run_id, **data})

    def _progress(self, now: datetime) -> None:
        """Storing a model reply or a tool result is progress: the failed attempts start again from zero."""
        self.failed_attempts, self.failing_since, self.updated_at = 0, None, now

    def replied(self, text: str | None, *, final: bool, now: datetime) -> list[SessionEvent]:
        """The model's reply is stored: one more step; without tool calls (``final``) the run is finished."""
        events = [SessionEvent("message", {"role": "assistant", "text": text, "run_id": self.run_id})] \
            if (text or "").strip() else []
        self.steps += 1
        self.status = "running"
        self._progress(now)
        if final:
            events += self.end("finished", None, now)
        return events

    def results_stored(self, *, fresh: bool, waiting: bool, now: datetime) -> None:
        """Tool results are stored (``fresh``: some were new); the run waits for a person or goes on."""
        self.status = "waiting" if waiting else "running"
        if fresh:
            self._progress(now)
        else:
            self.updated_at = now

    def end(self, status: str, error: dict[str, str] | None, now: datetime) -> list[SessionEvent]:
        """The run ended ``finished`` (no error) or ``failed``/``cancelled`` with ``error``."""
        self.status, self.error, self.updated_at = status, error, now
        return [self._event("run_finished")] if error is None else [self._event("run_failed", error=error)]

    def failed_attempt(self, now: datetime) -> tuple[int, float]:
        """Count a failed attempt: (failed attempts in a row, seconds since the first of them)."""
        self.failed_attempts += 1
        self.failing_since = self.failing_since or now
        self.updated_at = now
        return self.failed_attempts, (now - self.failing_since).total_seconds()

    def cancel(self, now: datetime) -> list[SessionEvent]:
        """The owner cancels the run: only while it waits for a person (idempotent once cancelled)."""
        if self.status == CANCELLED:
            return []
        if self.status == "running":
            raise RunRefusal("run_in_progress", "the run is working, not waiting for a decision", 409,
                             run_status=self.status)
        if self.status != "waiting":
            raise RunRefusal("run_not_waiting", f"the run is {self.status}; only a waiting run can be cancelled",
                             409, run_status=self.status)
        return self.end(CANCELLED, {"code": "cancelled", "message": "cancelled by its owner"}, now)


def start_refusal(working: Run | None) -> RunRefusal | None:
    """Why a new message cannot start a run now: a run of the session is working (SPEC §9: a waiting one
    does not block)."""
    if working is None:
        return None
    return RunRefusal("run_in_progress", "the agent is still working on the previous message", 409,
                      run_id=working.run_id, run_status=working.status)
