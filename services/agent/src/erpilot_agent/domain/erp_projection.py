"""Structural summaries of ERP tool results, used by the context view when a result is too large.

The summariser is chosen by the call's tool, through its result kind in the catalog (a trait, never a tool
name matched here), never by the result's content, so a result cannot pick its own projection. A summary
keeps what the model needs to act on later (identity, revision, customer, note, every line's item number,
SKU and quantity, totals) and is marked
``projected`` and ``refresh_required``: it is a historical observation, not current state.

A draft (or order) too long even for that is projected *compactly*: the summary with only the lines the
conversation touched (``LineFocus``: item numbers and SKUs named by the person or by earlier calls),
``lines_shown: "touched"`` and the ``get_draft`` call that pages through the rest (``read_lines``).
``reread_call`` names the call that reads a result's object again, for the view's markers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from erpilot_agent.domain.history import OUTCOME_STATUSES
from erpilot_contracts.tools.v1 import TOOLS, ResultKind, ToolKind


def _tools_with(kind: ResultKind) -> frozenset[str]:
    return frozenset(name for name, spec in TOOLS.items() if spec.traits.result_kind is kind)


def result_kind(tool: str) -> ResultKind | None:
    """The catalog's result kind of ``tool`` (None for a name the catalog does not know)."""
    spec = TOOLS.get(tool)
    return spec.traits.result_kind if spec is not None else None


DRAFT_TOOLS = _tools_with(ResultKind.DRAFT)
ORDER_TOOLS = _tools_with(ResultKind.ORDER)
SEARCH_TOOLS = _tools_with(ResultKind.LISTING)
PRODUCT_TOOLS = _tools_with(ResultKind.PRODUCT)
DOCUMENT_TOOLS = frozenset(name for name, spec in TOOLS.items() if spec.traits.result_kind.document)

PRODUCT_KEYS = ("sku", "name", "status", "price_minor", "currency", "on_hand")
DOCUMENT_KEYS = ("order_id", "amount_minor", "currency", "remaining_minor")
"""A document's keys besides its id (``ResultKind.id_key``): a refund, a credit note."""
ITEM_KEYS = ("customer_id", "sku", "order_id", "draft_id", "name", "status")
CANDIDATE_KEYS = ("draft_id", "revision", "customer_id", "customer_name", "total_amount_minor", "currency")
READ_TOOLS = frozenset(name for name, spec in TOOLS.items() if spec.kind is ToolKind.READ)
PAGE_SIZE = 50  # lines per get_draft page suggested to the model: a page's summary stays near 2.5 kB


@dataclass(frozen=True)
class LineFocus:
    """What the conversation touched: item numbers, and ids (SKUs, customer ids...) casefolded.

    A compact projection keeps the lines with these numbers or SKUs; a listing keeps the named items whole.
    """

    item_numbers: frozenset[int] = frozenset()
    ids: frozenset[str] = frozenset()

    def keeps(self, line: dict[str, Any]) -> bool:
        return line.get("item_number") in self.item_numbers or str(line.get("sku", "")).casefold() in self.ids


def _pick(source: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: source[key] for key in keys if source.get(key) is not None}


def _lines(lines: Any) -> list[dict[str, Any]]:
    """Every line as item_number (1-based, from the ERP or its position), sku and qty, in order."""
    if not isinstance(lines, list):
        return []
    summary = []
    for position, line in enumerate(lines, start=1):
        if isinstance(line, dict):
            summary.append({"item_number": line.get("item_number", position), **_pick(line, ("sku", "qty"))})
    return summary


def _customer(source: dict[str, Any]) -> dict[str, Any]:
    customer = source.get("customer") if isinstance(source.get("customer"), dict) else {}
    return _pick({"id": source.get("customer_id", customer.get("customer_id")),
                  "name": source.get("customer_name", customer.get("name"))}, ("id", "name"))


def _with_lines(summary: dict[str, Any], source: dict[str, Any], focus: LineFocus | None) -> dict[str, Any]:
    lines = _lines(source.get("lines"))
    # A get_draft page carries the revision's line_count; otherwise every line is here.
    line_count = source.get("line_count")
    summary["line_count"] = line_count if isinstance(line_count, int) else len(lines)
    if isinstance(source.get("offset"), int):
        summary["offset"] = source["offset"]
    if focus is None:
        summary["lines"] = lines
    else:
        summary["lines"] = [line for line in lines if focus.keeps(line)]
        summary["lines_shown"] = "touched"
    return summary


def summarise_draft(draft: dict[str, Any], focus: LineFocus | None = None) -> dict[str, Any]:
    """A draft revision without prices per line, stock or names (with ``focus``: only the touched lines)."""
    summary = _pick(draft, ("draft_id", "revision", "status"))
    summary["customer"] = _customer(draft)
    summary.update(_pick(draft, ("note", "total_amount_minor", "currency", "valid_until")))
    _with_lines(summary, draft, focus)
    if focus is not None and summary.get("draft_id") is not None:
        arguments = {**_pick(draft, ("draft_id", "revision")), "offset": 0, "limit": PAGE_SIZE}
        summary["read_lines"] = {"tool": "get_draft", "arguments": arguments}
    return summary


def summarise_order(order: dict[str, Any], focus: LineFocus | None = None) -> dict[str, Any]:
    """An order with its money state and every line's SKU and quantity (with ``focus``: the touched lines)."""
    summary = _pick(order, ("order_id", "status", "draft_id"))
    customer = _customer(order)
    if customer:
        summary["customer"] = customer
    summary.update(_pick(order, ("total_amount_minor", "currency", "paid_minor", "refunded_minor")))
    return _with_lines(summary, order, focus)


def summarise_task(task: dict[str, Any], focus: LineFocus | None = None) -> dict[str, Any]:
    """get_order_task: its status with the draft summary or the candidates' identities."""
    summary = _pick(task, ("status",))
    if isinstance(task.get("draft"), dict):
        summary["draft"] = summarise_draft(task["draft"], focus)
    if isinstance(task.get("candidates"), list):
        summary["candidates"] = [_pick(c, CANDIDATE_KEYS) for c in task["candidates"] if isinstance(c, dict)]
    return summary


def summarise_items(listing: dict[str, Any], named: frozenset[str] = frozenset(),
                    compact: bool = False) -> dict[str, Any] | None:
    """A search listing reduced to each item's id and name, with the count; ``named`` items stay whole.

    ``compact``: only the named items (``items_shown: "named"``).
    """
    items = [item for item in listing.get("items") or [] if isinstance(item, dict)]

    def is_named(item: dict[str, Any]) -> bool:
        return any(str(item.get(key, "")).casefold() in named for key in ("sku", "customer_id"))

    if compact:  # without a named item there is nothing worth more than the omitted marker
        shown = [item for item in items if is_named(item)]
        return {"count": len(items), "items": shown, "items_shown": "named"} if shown else None
    return {"count": len(items), "items": [item if is_named(item) else _pick(item, ITEM_KEYS) for item in items]}


def summarise_result(tool: str, result: dict[str, Any], focus: LineFocus | None = None,
                     named: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """The summary of one tool's result object, or None when the tool has no summariser.

    ``focus`` asks for the compact form (drafts, orders and tasks: the touched lines; listings: the
    named items). A listing keeps the items whose id is in ``named`` whole.
    """
    if tool in DRAFT_TOOLS:
        return summarise_draft(result, focus)
    if tool in ORDER_TOOLS:
        return summarise_order(result, focus)
    if result_kind(tool) is ResultKind.TASK:
        return summarise_task(result, focus)
    if tool in SEARCH_TOOLS:
        return summarise_items(result, named, compact=focus is not None)
    if focus is not None:
        return None
    if tool in PRODUCT_TOOLS:
        return _pick(result, PRODUCT_KEYS)
    kind = result_kind(tool)
    if kind is not None and kind.document:
        return _pick(result, (kind.id_key, *DOCUMENT_KEYS))
    return None


def project_erp_result(tool: str, content: Any, focus: LineFocus | None = None,
                       named: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """A smaller, valid-JSON view of a tool message's decoded content, or None if it cannot be projected.

    ``focus`` asks for the compact form (only the touched lines); None when the tool has none. ``named``:
    ids the conversation named (a listing keeps those items whole).
    """
    if not isinstance(content, dict):
        return None
    if content.get("status") not in OUTCOME_STATUSES:
        # A bare result object, stored without the outcome envelope.
        summary = summarise_result(tool, content, focus, named)
        return None if summary is None else {**summary, "projected": True, "refresh_required": True}
    # The envelope's own fields (status, error, reason, comment...) are small and kept; only the
    # result object is summarised.
    projected = {key: value for key, value in content.items() if key != "result"}
    if isinstance(content.get("result"), dict):
        summary = summarise_result(tool, content["result"], focus, named)
        if summary is None:
            return None
        projected["result"] = summary
    elif focus is not None:
        return None  # nothing long to make compact
    return {**projected, "projected": True, "refresh_required": True}


def reread_call(tool: str, arguments: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
    """The read call that shows a result's object again (``{"tool", "arguments"}``), or None.

    A long draft is read again a page at a time.
    """
    if tool in DRAFT_TOOLS and result.get("draft_id") is not None:
        again = {**arguments} if tool == "get_draft" else _pick(result, ("draft_id", "revision"))
        line_count = result.get("line_count", len(result.get("lines") or []))
        if isinstance(line_count, int) and line_count > PAGE_SIZE and "limit" not in again:
            again.update(offset=again.get("offset", 0), limit=PAGE_SIZE)
        return {"tool": "get_draft", "arguments": again}
    if tool in READ_TOOLS:
        return {"tool": tool, "arguments": arguments}
    if tool in ORDER_TOOLS | DOCUMENT_TOOLS and result.get("order_id") is not None:
        return {"tool": "get_order", "arguments": {"order_id": result["order_id"]}}
    if tool in PRODUCT_TOOLS and result.get("sku") is not None:
        return {"tool": "get_product", "arguments": {"sku": result["sku"]}}
    return None
