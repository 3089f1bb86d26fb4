"""The context view while it is reduced: its blocks, its tool results, its size as sent, and each reduction.

``build_context`` (``context_view``) decides what to reduce and in which order; this module does one
reduction at a time and keeps the running size exact. The size is that of the messages as the model gets
them (``model_ids.as_sent``: the model's own call ids, which are usually much shorter than the global
ones the history is stored under), the same bytes the agent checks against the budget after the view.

The reductions, none of which touches a system prompt or a user message:

- a tool result is ``project``-ed (summary), made ``compact`` (summary with the touched lines), ``omit``-ted
  (the omitted marker of SPEC §8) or ``shrink``-ed (the tiny marker: omitted, where to read it again);
- an assistant turn's calls ``leave`` the view with their results, every pair of the message together,
  once each of them may (the message itself goes unless it holds text);
- an earlier answer of the assistant is ``shorten``-ed to its first line, ``elide``-d to ``[…]`` or
  ``drop``-ped.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from erpilot_agent.domain.context_relevance import CLASS_NAMES, Observation, Relevance, classify
from erpilot_agent.domain.erp_projection import LineFocus, reread_call
from erpilot_agent.domain.history import OUTCOME_STATUSES, Block, Entry, entry_bytes, group_history, parse_json
from erpilot_agent.domain.model_ids import as_sent, issued_ids

Projector = Callable[[str, Any, LineFocus | None, frozenset[str]], Any]
"""(tool, decoded content, focus, named ids) -> summary or None; ``focus`` asks for the compact form."""

ORIGINAL, PROJECTED, COMPACT, OMITTED, TINY = range(5)
ELIDED = "[…]"  # an earlier answer of the assistant, left out
SHORT_ANSWER = 160  # characters of an earlier answer kept when it is shortened


def omitted_marker(content: str, *, call_id: str | None = None, reason: str | None = None,
                   see_call: str | None = None, reread: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stand-in for content that is not sent: its size and hash, a request to re-read it, and where."""
    raw = content.encode("utf-8")
    marker: dict[str, Any] = {"omitted": True, "original_length": len(raw),
                              "sha256": hashlib.sha256(raw).hexdigest(), "refresh_required": True}
    extra = {"call_id": call_id, "reason": reason, "see_call": see_call, "reread": reread}
    return {**marker, **{key: value for key, value in extra.items() if value is not None}}


def tiny_marker(call_id: str, *, see_call: str | None, reread: dict[str, Any] | None) -> dict[str, Any]:
    """The omitted marker cut to what the model needs: that it is omitted, whose, and one place to read it."""
    marker: dict[str, Any] = {"omitted": True, "refresh_required": True, "call_id": call_id}
    if see_call is not None:
        marker["see_call"] = see_call
    elif reread is not None:
        marker["reread"] = reread
    return marker


def shortened_answer(text: str) -> str:
    """An earlier answer cut to its first line (at most ``SHORT_ANSWER`` characters, at a word) and ``[…]``."""
    head = text.strip().split("\n", 1)[0]
    if len(head) > SHORT_ANSWER:
        head = head[:SHORT_ANSWER].rsplit(" ", 1)[0]
    return f"{head} {ELIDED}"


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


@dataclass
class ToolResult:
    """A tool result in the view, with what it was originally and how far it has been reduced."""

    entry: Entry
    obs: Observation
    original: str
    block: Block
    stage: int = ORIGINAL
    leaving: bool = False  # may leave; it does when every call of its assistant message may
    left: bool = False  # the call and this result have left the view

    @property
    def current(self) -> bool:
        """Made since the latest user message: the turn the model is working on."""
        return self.obs.after_last_user


class View:
    """The blocks being sent, their tool results oldest first, and their size as sent."""

    def __init__(self, history: list[Entry], projector: Projector):
        self.blocks = group_history(copy.deepcopy(history))
        self.projector = projector
        self.results: list[ToolResult] = []
        self.results_of: dict[int, list[ToolResult]] = {}  # id(block) -> its results, in call order
        self.left_calls: set[str] = set()
        self.issued = issued_ids(history)
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
                self.results.append(ToolResult(entry, obs, original, block))
                self.results_of.setdefault(id(block), []).append(self.results[-1])
        # "after the last user message": only results stored after it (positions past its block).
        last_user = max((i for i, b in enumerate(self.blocks) if b.message.get("role") == "user"), default=-1)
        self.earlier_blocks = self.blocks[:max(last_user, 0)]  # without a user message, all is the current turn
        after = {entry["tool_call_id"] for block in self.blocks[last_user + 1:] for entry in block.results}
        for result in self.results:
            result.obs.after_last_user = result.obs.call_id in after
        self.relevance: Relevance = classify([r.obs for r in self.results], user_texts)
        self.total_bytes = sum(self._sent_bytes(entry) for entry in self.entries())

    def _sent_bytes(self, entry: Entry) -> int:
        return entry_bytes(as_sent(entry, self.issued))

    def tokens(self) -> int:
        return math.ceil(self.total_bytes / 4)

    def _change(self, entry: Entry, change: Callable[[], None]) -> None:
        before = self._sent_bytes(entry)
        change()
        self.total_bytes += self._sent_bytes(entry) - before

    # --- tool results ------------------------------------------------------------------------

    def _replace(self, result: ToolResult, content: dict[str, Any], stage: int, force: bool = False) -> bool:
        text = _dumps(content)
        if result.left or (not force and _utf8_len(text) >= _utf8_len(result.entry["content"])):
            return False
        self._change(result.entry, lambda: result.entry.update(content=text))
        result.stage = stage
        return True

    def _summary(self, result: ToolResult, focus: LineFocus | None) -> dict[str, Any] | None:
        summary = self.projector(result.obs.tool, parse_json(result.original), focus, self.relevance.focus.ids)
        return None if summary is None else {**summary, "call_id": result.obs.call_id}

    def project(self, result: ToolResult) -> bool:
        """Replace the result by its summary if it has one that is smaller; True if it did."""
        summary = self._summary(result, None) if result.stage < PROJECTED else None
        return summary is not None and self._replace(result, summary, PROJECTED)

    def compact(self, result: ToolResult) -> bool:
        """Replace the result by its compact summary (touched lines only) if smaller; True if it did."""
        summary = self._summary(result, self.relevance.focus) if result.stage < COMPACT else None
        return summary is not None and self._replace(result, summary, COMPACT)

    def _where(self, result: ToolResult, reason: str) -> tuple[str | None, dict[str, Any] | None]:
        """(see_call, reread) for a marker: the later call still in view; the read, unless a duplicate has one."""
        obs = result.obs
        later = self.relevance.later_call.get(obs.call_id)
        see_call = later if later is not None and later not in self.left_calls else None
        if reason == "duplicate" and see_call is not None:
            return see_call, None
        return see_call, reread_call(obs.tool, obs.arguments, obs.result)

    def omit(self, result: ToolResult, *, reason: str | None = None, force: bool = False) -> bool:
        """Replace the result by the omitted marker if that is smaller (or forced); True if it did."""
        if result.stage >= OMITTED:
            return False
        reason = reason or CLASS_NAMES[self.relevance.drop_class[result.obs.call_id]]
        see_call, reread = self._where(result, reason)
        marker = omitted_marker(result.original, call_id=result.obs.call_id, reason=reason, see_call=see_call,
                                reread=reread)
        return self._replace(result, marker, OMITTED, force)

    def shrink(self, result: ToolResult) -> bool:
        """Replace the result by the tiny marker if that is smaller; True if it did."""
        if result.stage >= TINY:
            return False
        see_call, reread = self._where(result, CLASS_NAMES[self.relevance.drop_class[result.obs.call_id]])
        return self._replace(result, tiny_marker(result.obs.call_id, see_call=see_call, reread=reread), TINY)

    def leave(self, result: ToolResult) -> bool:
        """Let the call go with its result; its assistant turn leaves once all of its calls may go.

        An assistant message is never cut down to some of its calls: the model gets back exactly the calls
        of one answer it gave, or none of them (their text, if any, stays). True if the turn left now.
        """
        if result.left or result.leaving:
            return False
        result.leaving = True
        block = result.block
        together = self.results_of[id(block)]
        if not all(r.leaving for r in together):
            return False
        before = sum(self._sent_bytes(entry) for entry in self._block_entries(block))
        block.results.clear()
        del block.message["tool_calls"]
        for gone in together:
            gone.left = True
            self.left_calls.add(gone.obs.call_id)
        self.total_bytes += sum(self._sent_bytes(entry) for entry in self._block_entries(block)) - before
        for gone in together:
            self._redirect_markers(gone.obs.call_id)
        return True

    # --- earlier answers of the assistant ----------------------------------------------------

    def earlier_answers(self) -> list[Block]:
        """Assistant messages with text, before the latest user message, oldest first."""
        return [block for block in self.earlier_blocks
                if block.message.get("role") == "assistant" and (block.message.get("content") or "").strip()]

    def repeated_answers(self) -> list[Block]:
        """Earlier answers that a later answer repeats word for word, oldest first."""
        answers = [block for block in self.blocks
                   if block.message.get("role") == "assistant" and (block.message.get("content") or "").strip()]
        earlier = {id(block) for block in self.earlier_blocks}
        later_texts: set[str] = set()
        repeated = []
        for block in reversed(answers):
            text = block.message["content"].strip()
            if text in later_texts and id(block) in earlier:
                repeated.append(block)
            later_texts.add(text)
        return repeated[::-1]

    def _set_text(self, block: Block, text: str | None) -> bool:
        if text is not None and _utf8_len(text) >= _utf8_len(block.message.get("content") or ""):
            return False
        before = sum(self._sent_bytes(entry) for entry in self._block_entries(block))
        block.message["content"] = text
        self.total_bytes += sum(self._sent_bytes(entry) for entry in self._block_entries(block)) - before
        return True

    def shorten(self, block: Block) -> bool:
        """Cut an earlier answer to its first line and ``[…]``; True if that made it smaller."""
        return self._set_text(block, shortened_answer(block.message["content"]))

    def elide(self, block: Block) -> bool:
        """An earlier answer becomes ``[…]`` (text beside tool calls goes); True if that made it smaller."""
        return self._set_text(block, None if block.message.get("tool_calls") else ELIDED)

    def drop(self, block: Block) -> bool:
        """An earlier answer leaves the view (its tool calls, if any, stay); True if it had text."""
        return bool(block.message.get("content")) and self._set_text(block, None)

    # --- the messages ------------------------------------------------------------------------

    @staticmethod
    def _block_entries(block: Block) -> list[Entry]:
        """A block's messages as sent: an assistant message that lost every call and its text is not."""
        message = block.message
        if message.get("role") == "assistant" and not message.get("tool_calls") and not message.get("content"):
            return list(block.results)
        return block.entries()

    def entries(self) -> list[Entry]:
        return [entry for block in self.blocks for entry in self._block_entries(block)]

    def _redirect_markers(self, call_id: str) -> None:
        """Markers that name ``call_id`` (which has left) name the read that shows their object instead."""
        for result in self.results:
            if result.left or result.stage < OMITTED or self.relevance.later_call.get(result.obs.call_id) != call_id:
                continue
            marker = parse_json(result.entry["content"])
            if isinstance(marker, dict) and marker.get("see_call") == call_id:
                del marker["see_call"]
                reread = reread_call(result.obs.tool, result.obs.arguments, result.obs.result)
                marker.update({"reread": reread} if reread is not None else {})
                self._change(result.entry, lambda e=result.entry, m=marker: e.update(content=_dumps(m)))
