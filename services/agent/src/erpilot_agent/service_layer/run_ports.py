"""What the run driver needs from the outside world: persistence of runs and history, and tool calls.

The SQL implementation is ``adapters.runs.SqlRunStore`` / ``service_layer.run_tools.PipelineTools``;
the unit tests use in-memory fakes.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from erpilot_agent.domain.history import Entry
from erpilot_agent.domain.runs import StoredEntry
from erpilot_contracts.base import ReplyV1

ACTIVE = ("running", "waiting")


class RunRejected(Exception):
    """A message cannot start a run (unknown session, a run in progress, a reused message id)."""

    def __init__(self, reply: ReplyV1):
        super().__init__(reply.error.code)
        self.reply = reply


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    session_id: str
    owner: str
    status: str  # running | waiting | finished | failed
    steps: int


@dataclass(frozen=True)
class RunSnapshot:
    run: RunRecord
    history: list[StoredEntry]  # the whole session, every run, in order


@dataclass(frozen=True)
class ToolResult:
    """A result to store for the model; ``rejected`` = (tool, arguments) of a call that never started."""

    call_id: str
    content: dict[str, Any]
    rejected: tuple[str, Any] | None = None


@dataclass(frozen=True)
class CallStatus:
    state: str  # domain.tool_calls.CallState value
    content: dict[str, Any] | None  # ToolCall.model_content() once finished, else None
    live: dict[str, Any] | None = None  # ToolCall.model_content() now (e.g. awaiting_approval), any state


class RunStore(Protocol):
    async def start_run(self, *, session_id: str, owner: str, message_id: str, text: str) -> tuple[str, bool]:
        """Record the user message and a new run; (run_id, created). Raises RunRejected."""
        ...

    def lock(self, session_id: str) -> AbstractAsyncContextManager[bool]:
        """Exclusive right to drive the session's run, held until exit; yields False if someone else has it."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def load(self, run_id: str) -> RunSnapshot | None: ...

    async def record_reply(self, run_id: str, entry: Entry) -> None:
        """Store the assistant entry (one more step); without tool calls it also finishes the run."""
        ...

    async def record_results(self, run_id: str, results: list[ToolResult], *, waiting: bool) -> None:
        """Store tool results; the run is then ``waiting`` (some call needs a person) or ``running``."""
        ...

    async def finish(self, run_id: str) -> None: ...

    async def fail(self, run_id: str, code: str, message: str) -> None: ...

    async def note_failure(self, run_id: str) -> tuple[int, float]:
        """Count a failed attempt (it also delays the next recovery attempt): (failed attempts in a row,
        seconds since the first of them). Storing a model reply or a tool result resets the count."""
        ...

    async def resumable(self, run_id: str) -> bool:
        """The run waits, but every tool call it made has finished."""
        ...

    async def runs_to_resume(self, *, stale_seconds: float) -> list[str]: ...

    async def has_running_runs(self) -> bool:
        """Some run anywhere is ``running``: being driven, or left so by a crash or a failed attempt."""
        ...

    async def cancel(self, *, session_id: str, owner: str, run_id: str) -> list[str]:
        """Cancel a waiting run (idempotent); the pending ids of its calls still awaiting approval.
        Raises RunRejected (unknown run, a run actively working, a run already over)."""
        ...

    async def run_of_call(self, call_key: str) -> str | None:
        """The run a model's tool call (by its ``call_key``) belongs to (None for external calls)."""
        ...


class Tools(Protocol):
    async def start(self, *, session_id: str, owner: str, run_id: str, call_id: str, tool: str,
                    arguments: Any) -> None:
        """Record and drive a call as far as it goes without a person. Raises CallRejected."""
        ...

    async def status(self, session_id: str, call_ids: list[str]) -> dict[str, CallStatus]:
        """The recorded calls of the session among ``call_ids`` (call ids are unique per session only)."""
        ...

    async def denied_tools(self) -> frozenset[str]:
        """The tools the policy in force denies (left out of what the model is offered)."""
        ...
