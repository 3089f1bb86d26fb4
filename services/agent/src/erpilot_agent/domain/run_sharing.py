"""Runs beside a waiting run, and the tools a model is offered (SPEC §9); plain functions, no I/O.

A run that waits for a person no longer blocks its session: a new message starts a run beside it.
The model of the new run sees the whole history, in which the waiting run's call has no stored result
yet (results are stored by the run that made the call, once it goes on). ``open_calls`` names such
calls and ``with_states`` gives each its *current* state as its result in the view (awaiting
approval with its ``pending_id`` and deadline, or how it ended), never stored, so the model knows the
order is still with a person instead of guessing; the stored history is not changed.
"""

from __future__ import annotations

from typing import Any

from erpilot_agent.domain.history import Entry, tool_message
from erpilot_agent.domain.runs import StoredEntry, answered_call_ids

# A waiting run blocks nothing; a run that is working (asking the model, running calls) does.
BLOCKING_RUN_STATES = frozenset({"running"})


def open_calls(history: list[StoredEntry], run_id: str) -> list[str]:
    """Calls of other runs that have no stored result, in history order."""
    answered = answered_call_ids(history)
    return [call["id"] for item in history if item.run_id != run_id
            for call in item.entry.get("tool_calls") or [] if call["id"] not in answered]


def with_states(entries: list[Entry], states: dict[str, dict[str, Any] | None]) -> list[Entry]:
    """``entries`` plus one result per open call: its current state (the view places it after its call)."""
    extra = [tool_message(call_id, state if state is not None else {"status": "in_progress"})
             for call_id, state in states.items()]
    return [*entries, *extra]


def offered_tools(tool_specs: list[dict[str, Any]], denied: frozenset[str]) -> list[dict[str, Any]]:
    """The OpenAI tool specs without the tools the policy denies (the model is not offered them)."""
    return [spec for spec in tool_specs if spec["function"]["name"] not in denied]
