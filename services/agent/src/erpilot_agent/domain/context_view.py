"""The context view (SPEC §8): a fresh, budgeted projection of a session's history for one model request.

The stored history is never changed: it stays the record for audit and replay, and the view is
rebuilt from it for every request. Rules, in order:

1. Every entry is kept and grouped: a tool-call message is followed by one result per call
   (``history.group_history``). System prompt, user and assistant messages are sent verbatim.
2. A tool result whose content exceeds ``tool_bytes`` (UTF-8) is projected to a structural summary
   (``erp_projection``); if the summary still exceeds ``tool_bytes`` or the tool has no summariser,
   it is replaced by the omitted marker
   ``{"omitted": true, "original_length": <UTF-8 bytes>, "sha256": <hex of those bytes>,
   "refresh_required": true}``.
3. While the estimate exceeds ``budget_tokens``: project the remaining tool results, oldest first;
   then replace tool results by the omitted marker, oldest first. The newest results go last.
4. If it still does not fit, raise ``ContextOverflow``; nothing else is ever dropped.

Token estimate: ``history.estimate_tokens`` = ceil(sum over the sent messages of the UTF-8 length of
``json.dumps(message, ensure_ascii=False, separators=(",", ":"))`` / 4). Tool schemas sent beside the
messages are not counted, so this bounds the messages, not the whole request.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from erpilot_agent.domain.erp_projection import project_erp_result
from erpilot_agent.domain.history import Entry, entry_bytes, group_history, parse_json

DEFAULT_BUDGET_TOKENS = 32000
DEFAULT_TOOL_BYTES = 4096

Projector = Callable[[str, Any], Any]


class ContextOverflow(Exception):
    """Even with every tool result reduced, the protected messages exceed the budget."""

    code = "context_overflow"

    def __init__(self, estimated_tokens: int, budget_tokens: int):
        super().__init__(f"context needs ~{estimated_tokens} tokens, budget is {budget_tokens}")
        self.estimated_tokens = estimated_tokens
        self.budget_tokens = budget_tokens


def omitted_marker(content: str) -> dict[str, Any]:
    """The stand-in for content that cannot be sent: its size and hash, and a request to re-read it."""
    raw = content.encode("utf-8")
    return {"omitted": True, "original_length": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
            "refresh_required": True}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


@dataclass
class _ToolResult:
    """A tool result in the view, with what it was originally and how far it has been reduced."""

    entry: Entry
    tool: str
    original: str
    stage: str = "original"  # original -> projected -> omitted


class _View:
    """The entries being sent and their running size."""

    def __init__(self, history: list[Entry], projector: Projector):
        self.blocks = group_history(copy.deepcopy(history))
        self.projector = projector
        self.results: list[_ToolResult] = []  # oldest first
        for block in self.blocks:
            names = {call["id"]: call["function"]["name"] for call in block.message.get("tool_calls") or []}
            for entry in block.results:
                content = entry.get("content")
                original = content if isinstance(content, str) else _dumps(content)
                entry["content"] = original  # the API takes tool content as a string
                self.results.append(_ToolResult(entry, names[entry["tool_call_id"]], original))
        self.total_bytes = sum(entry_bytes(entry) for block in self.blocks for entry in block.entries())

    def tokens(self) -> int:
        return math.ceil(self.total_bytes / 4)

    def _replace(self, result: _ToolResult, content: str, stage: str) -> None:
        before = entry_bytes(result.entry)
        result.entry["content"] = content
        result.stage = stage
        self.total_bytes += entry_bytes(result.entry) - before

    def project(self, result: _ToolResult) -> bool:
        """Replace the result by its summary if it has one that is smaller; True if it did."""
        if result.stage != "original":
            return False
        summary = self.projector(result.tool, parse_json(result.original))
        if summary is None:
            return False
        text = _dumps(summary)
        if _utf8_len(text) >= _utf8_len(result.entry["content"]):
            return False
        self._replace(result, text, "projected")
        return True

    def omit(self, result: _ToolResult, *, force: bool = False) -> bool:
        """Replace the result by the omitted marker if that is smaller (or forced); True if it did."""
        if result.stage == "omitted":
            return False
        text = _dumps(omitted_marker(result.original))
        if not force and _utf8_len(text) >= _utf8_len(result.entry["content"]):
            return False
        self._replace(result, text, "omitted")
        return True

    def entries(self) -> list[Entry]:
        return [entry for block in self.blocks for entry in block.entries()]


def build_context(
    history: list[Entry],
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    tool_bytes: int = DEFAULT_TOOL_BYTES,
    projector: Projector = project_erp_result,
) -> list[Entry]:
    """The messages to send for one model request; raises ContextOverflow when they cannot fit."""
    view = _View(history, projector)
    for result in view.results:
        if _utf8_len(result.original) > tool_bytes:
            view.project(result)
            if _utf8_len(result.entry["content"]) > tool_bytes:
                view.omit(result, force=True)
    for reduce in (view.project, view.omit):
        for result in view.results:
            if view.tokens() <= budget_tokens:
                return view.entries()
            reduce(result)
    if view.tokens() > budget_tokens:
        raise ContextOverflow(view.tokens(), budget_tokens)
    return view.entries()
