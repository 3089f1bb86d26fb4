"""The context view (SPEC §8, §9): a fresh, budgeted projection of a session's history for one model request.

The stored history is never changed: it stays the record for audit and replay, and the view is
rebuilt from it for every request. Rules, in order:

1. Every entry is kept and grouped: a tool-call message is followed by one result per call
   (``history.group_history``). System prompt, user and assistant messages are sent verbatim.
2. A tool result whose content exceeds ``tool_bytes`` (UTF-8) is projected to a structural summary
   (``erp_projection``); a draft or order still too long is projected compactly (its summary with the
   lines the conversation touched and the ``get_draft`` page call for the rest); if that still exceeds
   ``tool_bytes`` or the tool has no summariser, it is replaced by the omitted marker.
3. While the estimate exceeds ``budget_tokens``, results are reduced by relevance before age
   (``context_relevance``): duplicates become a reference to the later call; then superseded reads,
   listings, superseded draft revisions and the remaining results, each class projected (then made
   compact) and then omitted, oldest first; the kept results (current revisions of open drafts, the
   latest ``get_order_task`` answer, what the latest user message refers to) go last, the same way.
4. If it still does not fit, raise ``ContextOverflow``; nothing else is ever dropped.

Markers name the call that holds the full result (``call_id``, the ``tool_call_id`` the model sees):
a projection adds ``"projected": true, "refresh_required": true, "call_id"``; the omitted marker is
``{"omitted": true, "original_length": <UTF-8 bytes>, "sha256": <hex of those bytes>,
"refresh_required": true, "call_id", "reason", "see_call"?, "reread"?}`` where ``reason`` is
``size`` or the drop class (``duplicate``, ``superseded``, ``listing``, ``superseded_revision``,
``age``, ``kept``), ``see_call`` the later call that shows the same object (a duplicate's identical
result, a newer read or revision) and ``reread`` the read call that shows the object again.

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

from erpilot_agent.domain.context_relevance import (
    BY_AGE,
    CLASS_NAMES,
    DUPLICATE,
    KEPT,
    LISTING,
    SUPERSEDED_READ,
    SUPERSEDED_REVISION,
    Observation,
    Relevance,
    classify,
)
from erpilot_agent.domain.erp_projection import LineFocus, project_erp_result, reread_call
from erpilot_agent.domain.history import OUTCOME_STATUSES, Entry, entry_bytes, group_history, parse_json

DEFAULT_BUDGET_TOKENS = 32000
DEFAULT_TOOL_BYTES = 4096

Projector = Callable[[str, Any, LineFocus | None, frozenset[str]], Any]
"""(tool, decoded content, focus, named ids) -> summary or None; ``focus`` asks for the compact form."""


class ContextOverflow(Exception):
    """Even with every tool result reduced, the protected messages exceed the budget."""

    code = "context_overflow"

    def __init__(self, estimated_tokens: int, budget_tokens: int):
        super().__init__(f"context needs ~{estimated_tokens} tokens, budget is {budget_tokens}")
        self.estimated_tokens = estimated_tokens
        self.budget_tokens = budget_tokens


def omitted_marker(content: str, *, call_id: str | None = None, reason: str | None = None,
                   see_call: str | None = None, reread: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stand-in for content that is not sent: its size and hash, a request to re-read it, and where."""
    raw = content.encode("utf-8")
    marker: dict[str, Any] = {"omitted": True, "original_length": len(raw),
                              "sha256": hashlib.sha256(raw).hexdigest(), "refresh_required": True}
    extra = {"call_id": call_id, "reason": reason, "see_call": see_call, "reread": reread}
    return {**marker, **{key: value for key, value in extra.items() if value is not None}}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _outcome(content: Any) -> tuple[str, dict[str, Any]]:
    """(status, result object) of a stored tool content; a bare result object counts as succeeded."""
    if not isinstance(content, dict) or content.get("status") == "no_result_recorded":
        return "unknown", {}
    if content.get("status") in OUTCOME_STATUSES:
        result = content.get("result")
        return content["status"], result if isinstance(result, dict) else {}
    return "succeeded", content


STAGES = ("original", "projected", "compact", "omitted")


@dataclass
class _ToolResult:
    """A tool result in the view, with what it was originally and how far it has been reduced."""

    entry: Entry
    obs: Observation
    original: str
    stage: int = 0  # index in STAGES


class _View:
    """The entries being sent and their running size."""

    def __init__(self, history: list[Entry], projector: Projector):
        self.blocks = group_history(copy.deepcopy(history))
        self.projector = projector
        self.results: list[_ToolResult] = []  # oldest first
        user_texts = []
        for block in self.blocks:
            if block.message.get("role") == "user":
                user_texts.append(str(block.message.get("content") or ""))
            calls = {call["id"]: call["function"] for call in block.message.get("tool_calls") or []}
            for entry in block.results:
                content = entry.get("content")
                original = content if isinstance(content, str) else _dumps(content)
                entry["content"] = original  # the API takes tool content as a string
                function = calls[entry["tool_call_id"]]
                arguments = parse_json(function.get("arguments"))
                status, result = _outcome(parse_json(original))
                obs = Observation(len(self.results), entry["tool_call_id"], function["name"],
                                  arguments if isinstance(arguments, dict) else {}, status, result,
                                  hashlib.sha256(original.encode("utf-8")).hexdigest(), False)
                self.results.append(_ToolResult(entry, obs, original))
        # "after the last user message": only results stored after it (positions past its block).
        last_user = max((i for i, b in enumerate(self.blocks) if b.message.get("role") == "user"), default=-1)
        after = {entry["tool_call_id"] for block in self.blocks[last_user + 1:] for entry in block.results}
        for result in self.results:
            result.obs.after_last_user = result.obs.call_id in after
        self.relevance: Relevance = classify([r.obs for r in self.results], user_texts)
        self.total_bytes = sum(entry_bytes(entry) for block in self.blocks for entry in block.entries())

    def tokens(self) -> int:
        return math.ceil(self.total_bytes / 4)

    def _replace(self, result: _ToolResult, summary: dict[str, Any], stage: int, force: bool = False) -> bool:
        text = _dumps(summary)
        if not force and _utf8_len(text) >= _utf8_len(result.entry["content"]):
            return False
        before = entry_bytes(result.entry)
        result.entry["content"] = text
        result.stage = stage
        self.total_bytes += entry_bytes(result.entry) - before
        return True

    def _summary(self, result: _ToolResult, focus: LineFocus | None) -> dict[str, Any] | None:
        summary = self.projector(result.obs.tool, parse_json(result.original), focus, self.relevance.focus.ids)
        return None if summary is None else {**summary, "call_id": result.obs.call_id}

    def project(self, result: _ToolResult) -> bool:
        """Replace the result by its summary if it has one that is smaller; True if it did."""
        summary = self._summary(result, None) if result.stage < 1 else None
        return summary is not None and self._replace(result, summary, 1)

    def compact(self, result: _ToolResult) -> bool:
        """Replace the result by its compact summary (touched lines only) if smaller; True if it did."""
        summary = self._summary(result, self.relevance.focus) if result.stage < 2 else None
        return summary is not None and self._replace(result, summary, 2)

    def omit(self, result: _ToolResult, *, reason: str | None = None, force: bool = False) -> bool:
        """Replace the result by the omitted marker if that is smaller (or forced); True if it did."""
        if result.stage == 3:
            return False
        obs = result.obs
        see_call = self.relevance.later_call.get(obs.call_id)
        reason = reason or CLASS_NAMES[self.relevance.drop_class[obs.call_id]]
        reread = None if reason == "duplicate" else reread_call(obs.tool, obs.arguments, obs.result)
        marker = omitted_marker(result.original, call_id=obs.call_id, reason=reason, see_call=see_call,
                                reread=reread)
        return self._replace(result, marker, 3, force)

    def of_class(self, drop_class: int) -> list[_ToolResult]:
        return [r for r in self.results if self.relevance.drop_class[r.obs.call_id] == drop_class]

    def entries(self) -> list[Entry]:
        return [entry for block in self.blocks for entry in block.entries()]


def _fit_tool_bytes(view: _View, result: _ToolResult, tool_bytes: int) -> None:
    """Rule 2: project, then compact, then omit a result until it fits ``tool_bytes``."""
    for reduce in (view.project, view.compact):
        if _utf8_len(result.entry["content"]) <= tool_bytes:
            return
        reduce(result)
    if _utf8_len(result.entry["content"]) > tool_bytes:
        view.omit(result, reason="size", force=True)


_DROP_ORDER = (
    (DUPLICATE, ("omit",)),
    (SUPERSEDED_READ, ("project", "omit")),
    (LISTING, ("project", "omit")),
    (SUPERSEDED_REVISION, ("project", "compact", "omit")),
    (BY_AGE, ("project", "compact", "omit")),
    (KEPT, ("project", "compact", "omit")),
)


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
            _fit_tool_bytes(view, result, tool_bytes)
    for drop_class, steps in _DROP_ORDER:
        for step in steps:
            for result in view.of_class(drop_class):
                if view.tokens() <= budget_tokens:
                    return view.entries()
                getattr(view, step)(result)
    if view.tokens() > budget_tokens:
        raise ContextOverflow(view.tokens(), budget_tokens)
    return view.entries()
