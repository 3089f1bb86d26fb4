"""A session's stored history: OpenAI chat entries across every run, grouped and measured.

Entries are plain dicts in OpenAI chat format:

- ``{"role": "system" | "user", "content": str}``
- ``{"role": "assistant", "content": str | None, "tool_calls": [{"id", "type": "function",
  "function": {"name", "arguments": <JSON string>}}]}`` (``tool_calls`` optional)
- ``{"role": "tool", "tool_call_id": str, "content": <JSON string>}``

Tool result content is the JSON of ``ToolCall.model_content()`` (see ``tool_calls``):
``{"status": "succeeded", "result": {...}}``, ``{"status": "business_rejected" | "failed", "error":
{"code", "message"}}``, ``{"status": "not_executed", "reason", "comment"?}`` or
``{"status": "awaiting_approval", ...}``. A later result for the same ``tool_call_id`` supersedes an
earlier one (e.g. ``awaiting_approval`` followed by the final outcome).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

Entry = dict[str, Any]

OUTCOME_STATUSES = frozenset({
    "succeeded", "business_rejected", "not_executed", "failed", "awaiting_approval",
})


class MalformedHistory(ValueError):
    """The history cannot be turned into a valid chat request (e.g. a result without its call)."""


def system_message(text: str) -> Entry:
    """The system prompt entry."""
    return {"role": "system", "content": text}


def user_message(text: str) -> Entry:
    """A user message entry, stored verbatim."""
    return {"role": "user", "content": text}


def assistant_message(text: str | None, tool_calls: list[dict[str, Any]] | None = None) -> Entry:
    """An assistant entry; ``tool_calls`` given as ``[{"id", "name", "arguments": dict}]``."""
    entry: Entry = {"role": "assistant", "content": text}
    if tool_calls:
        entry["tool_calls"] = [
            {"id": call["id"], "type": "function", "function": {
                "name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)}}
            for call in tool_calls
        ]
    return entry


def tool_message(call_id: str, content: Any) -> Entry:
    """A tool result entry; ``content`` is serialised to a JSON string."""
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(content, ensure_ascii=False)}


def entry_bytes(entry: Entry) -> int:
    """UTF-8 size of one entry as sent: compact ``json.dumps(entry, ensure_ascii=False)``."""
    return len(json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def estimate_tokens(entries: list[Entry]) -> int:
    """Token estimate of SPEC §8: ceil(sum of ``entry_bytes`` over the entries / 4)."""
    return math.ceil(sum(entry_bytes(entry) for entry in entries) / 4)


def parse_json(text: Any) -> Any:
    """The decoded JSON of a content string, or None when it is not JSON."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


@dataclass
class Block:
    """One indivisible unit of the view: a message, or a tool-call message with all its results."""

    message: Entry
    results: list[Entry] = field(default_factory=list)

    def entries(self) -> list[Entry]:
        """The block's messages in send order."""
        return [self.message, *self.results]


def _call_ids(entry: Entry) -> list[str]:
    return [call["id"] for call in entry.get("tool_calls") or []]


def group_history(history: list[Entry]) -> list[Block]:
    """Group entries so each tool-call message is directly followed by exactly one result per call."""
    # Results are matched by tool_call_id wherever they were stored (an approval may finish after a
    # later user message), the last result of a call wins, and a call with no result yet gets a
    # placeholder so the request never leaves a call unanswered.
    latest: dict[str, Entry] = {}
    known_calls = {call_id for entry in history for call_id in _call_ids(entry)}
    for entry in history:
        if entry.get("role") == "tool":
            call_id = entry.get("tool_call_id")
            if call_id not in known_calls:
                raise MalformedHistory(f"tool result {call_id!r} has no matching tool call")
            latest[call_id] = entry
    blocks = []
    for entry in history:
        if entry.get("role") == "tool":
            continue
        block = Block(entry)
        for call_id in _call_ids(entry):
            block.results.append(latest.get(call_id) or tool_message(call_id, _NO_RESULT))
        blocks.append(block)
    return blocks


# Says honestly that the outcome is not in the history, rather than inventing one.
_NO_RESULT = {"status": "no_result_recorded", "refresh_required": True}


@dataclass(frozen=True)
class Exchange:
    """One tool call made after the last user message, with its latest result (None if none yet)."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    result: dict[str, Any] | None


@dataclass(frozen=True)
class Turn:
    """The last user message, the tool exchanges that followed it, and how many calls came before."""

    text: str
    exchanges: list[Exchange]
    calls_in_history: int


def _as_object(content: Any) -> dict[str, Any]:
    decoded = parse_json(content)
    return decoded if isinstance(decoded, dict) else {"status": "unreadable", "content": content}


def outcome_of(content: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(status, result) of a tool content; a bare result without the envelope counts as succeeded."""
    status = content.get("status")
    if status in OUTCOME_STATUSES or status == "unreadable":
        result = content.get("result")
        return status, result if isinstance(result, dict) else {}
    return "succeeded", content


def last_turn(history: list[Entry]) -> Turn | None:
    """The current turn of the conversation, or None when there is no user message."""
    # The last result stored for a call is its current one.
    results = {e.get("tool_call_id"): _as_object(e.get("content"))
               for e in history if e.get("role") == "tool"}
    calls_in_history = sum(len(_call_ids(entry)) for entry in history)
    user_index = max((i for i, e in enumerate(history) if e.get("role") == "user"), default=None)
    if user_index is None:
        return None
    exchanges = []
    for entry in history[user_index + 1:]:
        for call in entry.get("tool_calls") or []:
            arguments = parse_json(call["function"].get("arguments"))
            exchanges.append(Exchange(
                call_id=call["id"],
                name=call["function"]["name"],
                arguments=arguments if isinstance(arguments, dict) else {},
                result=results.get(call["id"]),
            ))
    return Turn(str(history[user_index].get("content") or ""), exchanges, calls_in_history)
