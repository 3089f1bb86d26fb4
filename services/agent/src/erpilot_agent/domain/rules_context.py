"""``show context``: the offline planner describes the request it was given (the context view, SPEC §8).

A person (or an e2e test) cannot see the model's request over HTTP; with the rules model this command
answers with what that request held: its size as the budget counts it, the user messages, how many tool
results came whole, projected or omitted, and the newest revision of every draft it shows with how many
of the draft's lines are in view.
"""

from __future__ import annotations

import json
from typing import Any

from erpilot_agent.domain.history import Entry, estimate_tokens

CONTEXT_WORDS = frozenset({"show context", "context"})


def _decoded(content: Any) -> Any:
    try:
        return json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return None


def _objects(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value, *(found for item in value.values() for found in _objects(item))]
    if isinstance(value, list):
        return [found for item in value for found in _objects(item)]
    return []


def _drafts_shown(results: list[tuple[str, Any]]) -> dict[str, tuple[int, int, int, str]]:
    """draft_id -> (newest revision shown, lines shown, line_count, call id) over the tool results."""
    shown: dict[str, tuple[int, int, int, str]] = {}
    for call_id, content in results:
        for obj in _objects(content):
            draft_id, revision, lines = obj.get("draft_id"), obj.get("revision"), obj.get("lines")
            if not (isinstance(draft_id, str) and isinstance(revision, int) and isinstance(lines, list)):
                continue
            line_count = obj.get("line_count") if isinstance(obj.get("line_count"), int) else len(lines)
            seen = (revision, len(lines), line_count, call_id)
            if draft_id not in shown or seen[:2] > shown[draft_id][:2]:
                shown[draft_id] = seen
    return shown


def describe_request(messages: list[Entry]) -> str:
    """What the request held: size, user messages, tool results by form, drafts and their lines."""
    users = sum(1 for m in messages if m.get("role") == "user")
    results = [(str(m.get("tool_call_id")), _decoded(m.get("content"))) for m in messages if m.get("role") == "tool"]
    projected = sum(1 for _, c in results if isinstance(c, dict) and c.get("projected") is True)
    omitted = sum(1 for _, c in results if isinstance(c, dict) and c.get("omitted") is True)
    text = (f"This request holds {len(messages)} message(s), ~{estimate_tokens(messages)} tokens: {users} user "
            f"message(s), {len(results)} tool result(s) ({projected} projected, {omitted} omitted).")
    drafts = _drafts_shown(results)
    if not drafts:
        return text + " No draft is shown."
    rows = [f"- {draft_id} revision {revision}: {lines} of {line_count} line(s) (call {call_id})"
            for draft_id, (revision, lines, line_count, call_id) in sorted(drafts.items())]
    return "\n".join([text, "Drafts shown (newest revision):", *rows])
