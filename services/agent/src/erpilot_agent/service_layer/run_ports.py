"""What the run driver works with besides the unit of work (``ports``): a run with its history, the results it
stores for the model, and the tool-call pipeline (``Tools``: ``run_tools.PipelineTools``; a fake in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from erpilot_agent.domain.run_state import Run
from erpilot_agent.domain.runs import StoredEntry


@dataclass(frozen=True)
class RunSnapshot:
    run: Run
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


class Tools(Protocol):
    async def start(self, *, run: Run, call_id: str, tool: str, arguments: Any) -> None:
        """Record and drive a call of ``run`` as far as it goes without a person (with the run's owner and
        requester assertion). Raises ``Refused`` when the call cannot start."""
        ...

    async def status(self, session_id: str, call_ids: list[str]) -> dict[str, CallStatus]:
        """The recorded calls of the session among ``call_ids`` (call ids are unique per session only)."""
        ...

    async def denied_tools(self) -> frozenset[str]:
        """The tools the policy in force denies (left out of what the model is offered)."""
        ...
