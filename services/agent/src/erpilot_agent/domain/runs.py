"""The model loop of one run as pure decisions over the stored history (no I/O).

A run starts with the user's message. Each step the driver looks at the stored history and asks
``next_action``:

- ``AskModel``: the last thing in the run is the user's message or a complete set of tool results;
- ``RunCalls``: the last assistant message of the run holds tool calls without a stored result (fresh
  ones, or ones left by a crash: their ids were stored with the assistant message *before* anything
  ran, so re-driving never issues a call twice);
- ``Finish``: the run's last message is an assistant answer without tool calls.

What the model answers is turned into one assistant entry (``assistant_turn``) with call ids that are
globally unique (``<run_id>:<model's id>``, suffixed when the model repeats an id): ``call_id`` is the
primary key of every tool call the agent records, models reuse ids like ``call_0`` freely, and the
run id is unpredictable (the gateway derives it with its signing key, and binds the run's requester assertion to
it), so no other client can claim a model's call id in advance. Each stored call also
keeps the id the model issued, verbatim (``model_id``): the model gets its calls back under those
(``domain.model_ids.for_model``), never under the global ones.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from erpilot_agent.domain.history import Entry
from erpilot_agent.domain.model_ids import MODEL_ID
from erpilot_contracts.json_input import BadInput, loads

MAX_STEPS = 12
CALL_ID_MAX = 100  # tool_calls.call_id column
_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:-]")


RETRIES_EXHAUSTED = "retries_exhausted"  # run_failed error.code when a run gives up


@dataclass(frozen=True)
class RetryBudget:
    """How long a run whose steps keep failing (a downstream away, ...) is retried before it fails.

    Attempts are counted in a row, across processes (they are stored with the run); any progress
    (a model answer or a tool result stored) starts the count again.
    """

    max_attempts: int = 10
    max_seconds: float = 600.0

    def exhausted(self, attempts: int, failing_seconds: float) -> str | None:
        """Why the run gives up now (None: try again later)."""
        if attempts >= self.max_attempts:
            return f"gave up after {attempts} failed attempts (ERPILOT_RUN_MAX_ATTEMPTS={self.max_attempts})"
        if failing_seconds >= self.max_seconds:
            return (f"gave up after {attempts} failed attempts over {failing_seconds:.0f}s "
                    f"(ERPILOT_RUN_GIVE_UP_SECONDS={self.max_seconds:g})")
        return None


class ModelError(Exception):
    """The model could not give a usable answer; the run fails with ``code``."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ModelToolCall:
    """One tool call as the model proposed it. ``arguments`` is JSON text (API models) or an object."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True)
class ModelReply:
    text: str | None
    tool_calls: list[ModelToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class CallRequest:
    """A stored tool call of the run to execute: its global id, tool name and raw argument text."""

    call_id: str
    name: str
    arguments_text: str


@dataclass(frozen=True)
class AskModel:
    pass


@dataclass(frozen=True)
class RunCalls:
    calls: list[CallRequest]


@dataclass(frozen=True)
class Finish:
    text: str


Action = AskModel | RunCalls | Finish


@dataclass(frozen=True)
class StoredEntry:
    """One history row: the entry and the run that wrote it."""

    run_id: str | None
    entry: Entry


def answered_call_ids(history: Iterable[StoredEntry]) -> set[str]:
    return {item.entry.get("tool_call_id") for item in history if item.entry.get("role") == "tool"}


def used_call_ids(history: Iterable[StoredEntry]) -> set[str]:
    return {call["id"] for item in history for call in item.entry.get("tool_calls") or []}


def next_action(history: list[StoredEntry], run_id: str) -> Action:
    """What the run needs next, decided from the stored history alone."""
    answered = answered_call_ids(history)
    own = [item.entry for item in history if item.run_id == run_id and item.entry.get("role") != "tool"]
    if not own or own[-1].get("role") != "assistant":
        return AskModel()
    last = own[-1]
    calls = last.get("tool_calls") or []
    if not calls:
        return Finish(last.get("content") or "")
    pending = [CallRequest(call["id"], call["function"]["name"], call["function"]["arguments"])
               for call in calls if call["id"] not in answered]
    return RunCalls(pending) if pending else AskModel()


def _global_id(run_id: str, model_id: str, used: set[str]) -> str:
    base = _ID_CHARS.sub("_", (model_id or "").strip()) or "call"
    candidate = f"{run_id}:{base}"
    if len(candidate) > CALL_ID_MAX - 6:
        candidate = f"{run_id}:{hashlib.sha256(base.encode()).hexdigest()[:24]}"
    unique, n = candidate, 1
    while unique in used:
        n += 1
        unique = f"{candidate}-{n}"
    used.add(unique)
    return unique


def arguments_text(arguments: Any) -> str:
    """The arguments as the JSON text an assistant message carries; text from the model is kept as is."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def assistant_turn(reply: ModelReply, run_id: str, history: list[StoredEntry]) -> Entry:
    """The assistant entry to store for a reply: globally unique call ids, and the model's own beside them."""
    if not reply.tool_calls and not (reply.text or "").strip():
        raise ModelError("model_error", "the model answered with neither text nor tool calls")
    entry: Entry = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        used = used_call_ids(history)
        entry["tool_calls"] = [
            {"id": _global_id(run_id, call.id, used), MODEL_ID: call.id, "type": "function",
             "function": {"name": call.name, "arguments": arguments_text(call.arguments)}}
            for call in reply.tool_calls
        ]
    return entry


class ArgumentsNotJson(ValueError):
    pass


def parse_arguments(text: str) -> Any:
    """The decoded arguments of a stored call (empty text means no arguments); hostile JSON from the model
    (duplicate keys, deep nesting, lone surrogates, NUL, huge integers) is refused like any other input."""
    if text is None or not str(text).strip():
        return {}
    try:
        return loads(text)
    except BadInput as exc:
        raise ArgumentsNotJson(f"arguments refused ({exc.code}): {exc}") from None


def rejected_content(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tool result the model gets for a call the agent refused to start (nothing was executed)."""
    if code == "policy_denied":
        return {"status": "not_executed", "reason": code, "message": message}
    error: dict[str, Any] = {"code": code, "message": message}
    if details and details.get("errors"):
        error["errors"] = details["errors"]
    return {"status": "failed", "error": error}
