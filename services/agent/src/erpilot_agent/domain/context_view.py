"""The context view (SPEC §8, §9): a fresh, budgeted projection of a session's history for one model request.

The stored history is never changed: it stays the record for audit and replay, and the view is
rebuilt from it for every request. Rules, in order:

1. Every entry is kept and grouped: a tool-call message is followed by one result per call
   (``history.group_history``). System prompt, user and assistant messages are sent verbatim.
2. A tool result whose content exceeds ``tool_bytes`` (UTF-8) is projected to a structural summary
   (``erp_projection``); a draft or order still too long is projected compactly (its summary with the
   lines the conversation touched and the ``get_draft`` page call for the rest); if that still exceeds
   ``tool_bytes`` or the tool has no summariser, it is replaced by the omitted marker.
3. While the estimate exceeds ``budget_tokens``, the view degrades step by step along ``LADDER``,
   relevance before age (``context_relevance``), oldest first within a step, and stops as soon as it
   fits. Results are projected, made compact and omitted class by class: duplicates, superseded reads,
   listings, superseded draft revisions, the rest by age. Reads that a later call shows again (a
   duplicate, a superseded read) leave the view whole, call and result together (an assistant message
   only with all of its calls; otherwise such a read stays as a tiny pair), and an answer repeated word
   for word later is cut to its first line. Then markers shrink to the tiny form and earlier answers of
   the assistant to their first line; then the kept results
   (``KEPT``) are reduced, every earlier pair but the open drafts' current revisions (and writes waiting
   for a person) leaves, earlier answers become ``[…]`` and then leave, and last the current turn's
   results shrink.
4. What always stays: the system prompt, every user message verbatim, the current revision of every
   open draft (projected or compact at most) and the current turn's tool-call pairs (a tiny marker at
   most). If that alone exceeds the budget, raise ``ContextOverflow``; nothing else causes it.

Every pair that is sent is intact (a call and its result together, under the id the model issued).
Markers name the call that holds the full result (``call_id``, the ``tool_call_id`` the model sees):
a projection adds ``"projected": true, "refresh_required": true, "call_id"``; the omitted marker is
``{"omitted": true, "original_length": <UTF-8 bytes>, "sha256": <hex of those bytes>,
"refresh_required": true, "call_id", "reason", "see_call"?, "reread"?}`` where ``reason`` is
``size`` or the drop class (``duplicate``, ``superseded``, ``listing``, ``superseded_revision``,
``age``, ``kept``), ``see_call`` the later call that shows the same object (a duplicate's identical
result, a newer read or revision) and ``reread`` the read call that shows the object again. The tiny
marker is ``{"omitted": true, "refresh_required": true, "call_id", "see_call" | "reread"}``. A marker
never names a call that has left the view.

Token estimate: ``history.estimate_tokens`` = ceil(sum over the sent messages of the UTF-8 length of
``json.dumps(message, ensure_ascii=False, separators=(",", ":"))`` / 4), measured on the messages as the
model gets them (``model_ids.for_model``). Tool schemas sent beside the messages are not counted, so
this bounds the messages, not the whole request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from erpilot_agent.domain.context_reductions import (
    OMITTED,
    Projector,
    ToolResult,
    View,
    omitted_marker,
    tiny_marker,
)
from erpilot_agent.domain.context_relevance import (
    BY_AGE,
    DUPLICATE,
    KEPT,
    LISTING,
    SUPERSEDED_READ,
    SUPERSEDED_REVISION,
)
from erpilot_agent.domain.erp_projection import READ_TOOLS, project_erp_result
from erpilot_agent.domain.history import Block, Entry

__all__ = ["DEFAULT_BUDGET_TOKENS", "DEFAULT_TOOL_BYTES", "LADDER", "ContextOverflow", "build_context",
           "omitted_marker", "tiny_marker"]

DEFAULT_BUDGET_TOKENS = 32000
DEFAULT_TOOL_BYTES = 4096


class ContextOverflow(Exception):
    """Even with everything but the protected messages reduced, the view exceeds the budget."""

    code = "context_overflow"

    def __init__(self, estimated_tokens: int, budget_tokens: int):
        super().__init__(f"context needs ~{estimated_tokens} tokens, budget is {budget_tokens}")
        self.estimated_tokens = estimated_tokens
        self.budget_tokens = budget_tokens


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _fit_tool_bytes(view: View, result: ToolResult, tool_bytes: int) -> None:
    """Rule 2: project, then compact, then omit a result until it fits ``tool_bytes``."""
    for reduce in (view.project, view.compact):
        if _utf8_len(result.entry["content"]) <= tool_bytes:
            return
        reduce(result)
    if _utf8_len(result.entry["content"]) > tool_bytes:
        view.omit(result, reason="size", force=True)


# --- what each step of the ladder applies to (oldest first) -----------------------------------

def _of_class(drop_class: int) -> Callable[[View], Iterable[ToolResult]]:
    return lambda view: (r for r in view.results if view.relevance.drop_class[r.obs.call_id] == drop_class)


def _shown_later(view: View) -> Iterable[ToolResult]:
    """Earlier reads whose object a later call shows: a duplicate, a superseded read."""
    return (r for r in view.results if not r.current and r.obs.tool in READ_TOOLS
            and view.relevance.drop_class[r.obs.call_id] in (DUPLICATE, SUPERSEDED_READ))


def _omitted_earlier(view: View) -> Iterable[ToolResult]:
    return (r for r in view.results if not r.current and r.stage == OMITTED)


def _earlier_unprotected(view: View) -> Iterable[ToolResult]:
    """Earlier results that may leave: all but the open drafts' current revisions and waiting writes."""
    return (r for r in view.results if not r.current and r.obs.call_id not in view.relevance.open_drafts
            and r.obs.status != "awaiting_approval")


def _current_unprotected(view: View) -> Iterable[ToolResult]:
    return (r for r in view.results if r.current and r.obs.call_id not in view.relevance.open_drafts)


def _unprotected(view: View) -> Iterable[ToolResult]:
    return (r for r in view.results if r.obs.call_id not in view.relevance.open_drafts)


def _earlier_answers(view: View) -> Iterable[Block]:
    return view.earlier_answers()


def _repeated_answers(view: View) -> Iterable[Block]:
    return view.repeated_answers()


Step = tuple[str, Callable[[View], Iterable[ToolResult | Block]]]

LADDER: tuple[Step, ...] = (
    ("omit", _of_class(DUPLICATE)),
    ("project", _of_class(SUPERSEDED_READ)), ("omit", _of_class(SUPERSEDED_READ)),
    ("leave", _shown_later), ("shrink", _shown_later), ("shorten", _repeated_answers),
    ("project", _of_class(LISTING)), ("omit", _of_class(LISTING)),
    ("project", _of_class(SUPERSEDED_REVISION)), ("compact", _of_class(SUPERSEDED_REVISION)),
    ("omit", _of_class(SUPERSEDED_REVISION)),
    ("project", _of_class(BY_AGE)), ("compact", _of_class(BY_AGE)), ("omit", _of_class(BY_AGE)),
    ("shrink", _omitted_earlier),
    ("shorten", _earlier_answers),
    ("project", _of_class(KEPT)), ("compact", _of_class(KEPT)),
    ("shrink", _earlier_unprotected),
    ("leave", _earlier_unprotected),
    ("elide", _earlier_answers), ("drop", _earlier_answers),
    ("omit", _current_unprotected), ("shrink", _unprotected),
)
"""The steps of rule 3 in order: (reduction of ``context_reductions.View``, what it applies to)."""


def build_context(
    history: list[Entry],
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    tool_bytes: int = DEFAULT_TOOL_BYTES,
    projector: Projector = project_erp_result,
) -> list[Entry]:
    """The messages to send for one model request; raises ContextOverflow when they cannot fit."""
    view = View(history, projector)
    for result in view.results:
        if _utf8_len(result.original) > tool_bytes:
            _fit_tool_bytes(view, result, tool_bytes)
    for reduction, targets in LADDER:
        for target in list(targets(view)):
            if view.tokens() <= budget_tokens:
                return view.entries()
            getattr(view, reduction)(target)
    if view.tokens() > budget_tokens:
        raise ContextOverflow(view.tokens(), budget_tokens)
    return view.entries()
