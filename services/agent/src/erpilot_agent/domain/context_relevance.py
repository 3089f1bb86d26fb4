"""Which tool results the context view may give up first when the budget presses (SPEC §9).

Every result of the history is put in one drop class; the view reduces the classes in this order, and
within a class oldest first:

1. ``DUPLICATE`` — a result identical to a later one: the same content hash, or the same read tool with
   the same canonical arguments. It becomes a short reference to the later call.
2. ``SUPERSEDED_READ`` — a read (``get_product``, ``get_order``) of an object read again later (or
   returned again by a later write of it); every ``get_order_task`` answer but the latest.
3. ``LISTING`` — ``search_customers`` / ``search_products``.
4. ``SUPERSEDED_REVISION`` — a draft revision superseded by a newer revision of the same draft (or the
   same revision shown again later).
5. ``BY_AGE`` — everything else.
6. ``KEPT`` — reduced only when nothing else is left: the current revision of every open draft of the
   session (its latest full observation), the latest ``get_order_task`` answer whatever its status,
   results the latest user message refers to (an id or SKU they contain, a line number of an open
   draft's current revision) and results of the calls made since that message. A reference protects a
   result from classes 3 and 5 only: a duplicate or a superseded read or revision is dropped in favour
   of the newer observation of the same object, which is the one the person refers to.

Which drafts are open is read from the history: a draft's status in its latest observation, closed by a
later succeeded ``submit_order`` of it or by a later ``get_order_task`` answer that does not list it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from erpilot_agent.domain.erp_projection import (
    DRAFT_TOOLS,
    ORDER_TOOLS,
    PRODUCT_TOOLS,
    READ_TOOLS,
    SEARCH_TOOLS,
    LineFocus,
)
from erpilot_contracts.tools.v1 import TOOLS, ResultKind, ToolKind

TASK_TOOLS = frozenset(name for name, spec in TOOLS.items() if spec.traits.result_kind is ResultKind.TASK)
SUBMITS_A_DRAFT = frozenset(name for name, spec in TOOLS.items()
                            if spec.kind is ToolKind.WRITE and spec.traits.object_key == "draft_id")
"""Writes on a draft: once one succeeds, the draft is no longer open (it became an order)."""

DUPLICATE, SUPERSEDED_READ, LISTING, SUPERSEDED_REVISION, BY_AGE, KEPT = range(1, 7)
CLASS_NAMES = {DUPLICATE: "duplicate", SUPERSEDED_READ: "superseded", LISTING: "listing",
               SUPERSEDED_REVISION: "superseded_revision", BY_AGE: "age", KEPT: "kept"}

ID_KEYS = frozenset({"sku", "order_id", "draft_id", "customer_id", "pending_id", "refund_id", "expected_sku"})
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
_LINE_RANGE = re.compile(r"\b(?:lines?|items?|rows?|positions?)\s*(?:no\.?|number|#)?\s*(\d+)"
                         r"(?:\s*(?:-|–|to|through)\s*(\d+))?", re.IGNORECASE)
_MAX_RANGE = 200  # "lines 1-100000" names no lines rather than 100000


@dataclass
class Observation:
    """One tool result as the view sees it: which call, its arguments and its decoded outcome."""

    position: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    status: str
    result: dict[str, Any]
    sha256: str
    after_last_user: bool


@dataclass(frozen=True)
class Relevance:
    """The drop class of every call, the later call a dropped one defers to, and the lines to keep.

    ``open_drafts``: the calls holding the current revision of an open draft, which the view never omits
    (SPEC §8: with the user messages and the system prompt, the least a request may hold).
    """

    drop_class: dict[str, int]
    later_call: dict[str, str]
    focus: LineFocus
    open_drafts: frozenset[str] = frozenset()


def line_numbers(text: str) -> set[int]:
    """Line numbers a message names: "line 17", "item #3", "lines 30-32"."""
    numbers: set[int] = set()
    for match in _LINE_RANGE.finditer(text):
        first = int(match[1])
        last = int(match[2]) if match[2] else first
        if first <= last <= first + _MAX_RANGE:
            numbers.update(range(first, last + 1))
        else:
            numbers.add(first)
    return numbers


def tokens(text: str) -> set[str]:
    """Casefolded id-like words of a message (trailing punctuation dropped), at least 3 characters."""
    words = (word.rstrip(".:-_").casefold() for word in _TOKEN.findall(text))
    return {word for word in words if len(word) >= 3}


def _identifiers(value: Any, found: set[str], depth: int = 0) -> set[str]:
    """Every id-like value (``ID_KEYS``) inside a result, casefolded."""
    if depth > 6:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ID_KEYS and isinstance(item, str):
                found.add(item.casefold())
            else:
                _identifiers(item, found, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _identifiers(item, found, depth + 1)
    return found


def _canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _is_page(obs: Observation) -> bool:
    return "offset" in obs.arguments or "limit" in obs.arguments or "offset" in obs.result


def _revision_of(obs: Observation) -> tuple[str, int, bool] | None:
    """(draft_id, revision, open) of the draft revision a result holds, or None."""
    draft = obs.result
    if obs.tool in TASK_TOOLS:
        draft = obs.result.get("draft") if obs.result.get("status") == "ok" else None
    elif obs.tool not in DRAFT_TOOLS:
        return None
    if obs.status != "succeeded" or not isinstance(draft, dict):
        return None
    draft_id, revision = draft.get("draft_id"), draft.get("revision")
    if not isinstance(draft_id, str) or not isinstance(revision, int):
        return None
    return draft_id, revision, draft.get("status", "open") == "open"


def _object_key(obs: Observation) -> tuple[str, str] | None:
    """The object a read shows (or a succeeded write returns), for superseded reads."""
    if obs.tool not in READ_TOOLS and obs.status != "succeeded":
        return None  # a write that did not happen shows nothing newer
    if obs.tool in PRODUCT_TOOLS:
        sku = obs.arguments.get("sku")
        return None if sku is None else ("product", str(sku))
    if obs.tool in ORDER_TOOLS:
        order_id = obs.arguments.get("order_id") or obs.result.get("order_id")
        return None if order_id is None else ("order", str(order_id))
    return None


class _Drafts:
    """Which drafts are open and their current revision, followed through the history in order."""

    def __init__(self) -> None:
        self.revision: dict[str, int] = {}
        self.open: dict[str, bool] = {}

    def see(self, obs: Observation) -> None:
        if obs.tool in TASK_TOOLS and obs.status == "succeeded":
            task = obs.result
            listed = {c.get("draft_id"): c.get("revision") for c in task.get("candidates") or []
                      if isinstance(c, dict)} if task.get("status") == "ambiguous" else {}
            for draft_id in self.open:  # the answer lists every open draft of the session
                self.open[draft_id] = draft_id in listed
            for draft_id, revision in listed.items():
                if isinstance(draft_id, str) and isinstance(revision, int):
                    self._observe(draft_id, revision, True)
        held = _revision_of(obs)
        if held is not None:
            self._observe(*held)
        if obs.tool in SUBMITS_A_DRAFT and obs.status == "succeeded":
            self.open[str(obs.arguments.get("draft_id"))] = False

    def _observe(self, draft_id: str, revision: int, is_open: bool) -> None:
        if revision >= self.revision.get(draft_id, 0):
            self.revision[draft_id] = revision
            self.open[draft_id] = is_open


def classify(observations: list[Observation], user_texts: list[str]) -> Relevance:
    """The drop class of each observation (``observations`` oldest first; ``user_texts`` likewise)."""
    latest_text = user_texts[-1] if user_texts else ""
    named_ids, named_lines = tokens(latest_text), line_numbers(latest_text)
    drafts = _Drafts()
    for obs in observations:
        drafts.see(obs)

    later: dict[str, str] = {}
    last_by_key: dict[Any, Observation] = {}
    for obs in observations:
        last_by_key[("sha", obs.sha256)] = obs
        if obs.tool in READ_TOOLS:
            last_by_key[("args", obs.tool, _canonical(obs.arguments))] = obs
    classes: dict[str, int] = {}
    for obs in observations:
        keys = [("sha", obs.sha256)] + ([("args", obs.tool, _canonical(obs.arguments))]
                                        if obs.tool in READ_TOOLS else [])
        newest = max((last_by_key[key] for key in keys), key=lambda o: o.position)
        if newest.position > obs.position:
            classes[obs.call_id], later[obs.call_id] = DUPLICATE, newest.call_id

    newest_object: dict[tuple[str, str], Observation] = {}
    keeper: dict[str, Observation] = {}  # draft_id -> latest full observation of its current revision
    for obs in observations:
        if (key := _object_key(obs)) is not None:
            newest_object[key] = obs
        held = _revision_of(obs)
        if held is not None and not _is_page(obs) and held[1] == drafts.revision[held[0]]:
            keeper[held[0]] = obs
    tasks = [obs for obs in observations if obs.tool in TASK_TOOLS]
    latest_task = tasks[-1] if tasks else None

    for obs in observations:
        if obs.call_id in classes:
            continue
        key, held = _object_key(obs), _revision_of(obs)
        if obs.tool in TASK_TOOLS and latest_task is not None and obs is not latest_task:
            classes[obs.call_id], later[obs.call_id] = SUPERSEDED_READ, latest_task.call_id
        elif obs.tool in READ_TOOLS and key is not None and newest_object[key] is not obs:
            classes[obs.call_id], later[obs.call_id] = SUPERSEDED_READ, newest_object[key].call_id
        elif held is not None and obs is not latest_task and keeper.get(held[0]) is not obs and (
                held[1] < drafts.revision[held[0]] or not _is_page(obs)):
            classes[obs.call_id] = SUPERSEDED_REVISION
            if held[0] in keeper:
                later[obs.call_id] = keeper[held[0]].call_id
        elif obs.tool in SEARCH_TOOLS:
            classes[obs.call_id] = LISTING
        else:
            classes[obs.call_id] = BY_AGE

    open_keepers = {id(obs) for draft_id, obs in keeper.items() if drafts.open.get(draft_id)}
    for obs in observations:
        held = _revision_of(obs)
        current_page = held is not None and drafts.open.get(held[0]) and held[1] == drafts.revision[held[0]]
        refers = bool(named_ids & _identifiers([obs.result, obs.arguments], set())) or bool(
            current_page and named_lines & {line.get("item_number") for line in _result_lines(obs)})
        if id(obs) in open_keepers or obs is latest_task:
            classes[obs.call_id] = KEPT
            later.pop(obs.call_id, None)
        elif (refers or obs.after_last_user) and classes[obs.call_id] in (LISTING, BY_AGE):
            classes[obs.call_id] = KEPT
    open_drafts = frozenset(obs.call_id for obs in observations if id(obs) in open_keepers)
    return Relevance(classes, later, _focus(observations, user_texts), open_drafts)


def _result_lines(obs: Observation) -> list[dict[str, Any]]:
    draft = obs.result.get("draft") if obs.tool in TASK_TOOLS else obs.result
    lines = draft.get("lines") if isinstance(draft, dict) else None
    return [line for line in lines or [] if isinstance(line, dict)]


def _focus(observations: list[Observation], user_texts: list[str]) -> LineFocus:
    """The lines the conversation touched: named by the person, or by the item_number of a call."""
    item_numbers: set[int] = set()
    ids: set[str] = set()
    for text in user_texts:
        item_numbers |= line_numbers(text)
        ids |= tokens(text)
    for obs in observations:
        if isinstance(obs.arguments.get("item_number"), int):
            item_numbers.add(obs.arguments["item_number"])
        for key in ("sku", "expected_sku"):
            if isinstance(obs.arguments.get(key), str):
                ids.add(obs.arguments[key].casefold())
    return LineFocus(frozenset(item_numbers), frozenset(ids))
