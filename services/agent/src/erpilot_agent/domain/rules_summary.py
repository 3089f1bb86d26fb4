"""Short human summaries of tool outcomes, written by the rules planner as its final reply."""

from __future__ import annotations

from typing import Any

from erpilot_agent.domain.erp_projection import result_kind
from erpilot_agent.domain.history import Exchange, outcome_of
from erpilot_agent.domain.money import format_minor
from erpilot_contracts.tools.v1 import ResultKind

_MAX_LISTED = 10


def _money(source: dict[str, Any], key: str) -> str:
    amount, currency = source.get(key), source.get("currency")
    if isinstance(amount, int) and isinstance(currency, str):
        return format_minor(amount, currency)
    return "?"


def describe_draft(draft: dict[str, Any]) -> str:
    """``Draft D-1 revision 2 for Alice Ltd: 3 line(s), total 12.50 EUR.``"""
    # A projected draft carries its line_count and customer {id, name}; a page shows some of the lines.
    line_count = draft.get("line_count", len(draft.get("lines") or []))
    customer = draft.get("customer") if isinstance(draft.get("customer"), dict) else {}
    text = (f"Draft {draft.get('draft_id')} revision {draft.get('revision')} for "
            f"{draft.get('customer_name') or customer.get('name') or draft.get('customer_id')}: "
            f"{line_count} line(s), total {_money(draft, 'total_amount_minor')}.")
    if isinstance(draft.get("offset"), int):
        shown = [f"{line.get('item_number')}. {line.get('sku')} x{line.get('qty')}"
                 for line in draft.get("lines") or [] if isinstance(line, dict)]
        text += " Lines: " + ("; ".join(shown) if shown else "none in that range") + "."
    if draft.get("note"):
        text += f" Note: {draft['note']}"
    return text


def describe_candidates(candidates: list[dict[str, Any]]) -> str:
    """The open drafts to choose from, one per line, with how to pick one."""
    rows = [f"- {c.get('draft_id')} revision {c.get('revision')}, customer {c.get('customer_id')}, "
            f"total {_money(c, 'total_amount_minor')}" for c in candidates]
    return ("This session has several open drafts:\n" + "\n".join(rows)
            + "\nSay which one, e.g. 'draft <id>: submit'.")


def _describe_task(task: dict[str, Any]) -> str:
    if task.get("status") == "ok" and isinstance(task.get("draft"), dict):
        return "Open draft: " + describe_draft(task["draft"])
    if task.get("status") == "ambiguous":
        return describe_candidates(task.get("candidates") or [])
    return "This session has no open draft. Create one with 'draft for <customer_id>: <sku> x<qty>'."


def _describe_items(tool: str, listing: dict[str, Any]) -> str:
    items = listing.get("items") or []
    noun = "customer(s)" if tool == "search_customers" else "product(s)"
    rows = [f"- {item.get('customer_id') or item.get('sku')} {item.get('name', '')}".rstrip()
            for item in items[:_MAX_LISTED]]
    more = [f"... and {len(items) - _MAX_LISTED} more"] if len(items) > _MAX_LISTED else []
    return "\n".join([f"Found {len(items)} {noun}.", *rows, *more])


def _describe_product(product: dict[str, Any]) -> str:
    return (f"{product.get('sku')} {product.get('name')}: {_money(product, 'price_minor')}, "
            f"on hand {product.get('on_hand')}, {product.get('status')}.")


def _describe_order(order: dict[str, Any]) -> str:
    line_count = len(order.get("lines") or [])
    return (f"Order {order.get('order_id')} is {order.get('status')}: {line_count} line(s), "
            f"total {_money(order, 'total_amount_minor')}, paid {_money(order, 'paid_minor')}, "
            f"refunded {_money(order, 'refunded_minor')}.")


def _describe_document(kind: ResultKind, document: dict[str, Any]) -> str:
    """A refund or a credit note: money booked against an order."""
    return (f"{kind.label} {document.get(kind.id_key)} of {_money(document, 'amount_minor')} on order "
            f"{document.get('order_id')}; {_money(document, 'remaining_minor')} remains {kind.remains}.")


def describe_result(tool: str, result: dict[str, Any]) -> str:
    """What a succeeded tool returned, in one short paragraph."""
    kind = result_kind(tool)
    if kind is ResultKind.TASK:
        return _describe_task(result)
    if kind is ResultKind.LISTING:
        return _describe_items(tool, result)
    if kind is ResultKind.PRODUCT:
        return _describe_product(result)
    if kind is ResultKind.ORDER:
        return _describe_order(result)
    if kind is not None and kind.document:
        return _describe_document(kind, result)
    if "draft_id" in result:
        return describe_draft(result)
    return f"{tool} returned {result}."


def summarise(exchange: Exchange) -> str:
    """The final reply for one finished (or waiting) tool call."""
    content = exchange.result or {}
    status, result = outcome_of(content)
    error = content.get("error") if isinstance(content.get("error"), dict) else {}
    if status == "succeeded":
        return f"Done ({exchange.name} succeeded). {describe_result(exchange.name, result)}"
    if status == "business_rejected":
        return f"The ERP rejected {exchange.name}: {error.get('code')} - {error.get('message')}."
    if status == "not_executed":
        text = f"{exchange.name} was not executed: {content.get('reason')}."
        if content.get("comment"):
            text += f" Approver's comment: {content['comment']}"
        return text
    if status == "awaiting_approval":
        return (f"{exchange.name} is awaiting approval (pending {content.get('pending_id')}, expires "
                f"{content.get('expires_at')}). Approve or reject it at {content.get('approval_url')}.")
    if status == "failed":
        return f"{exchange.name} failed: {error.get('code')} - {error.get('message')}."
    return f"{exchange.name} has no usable result ({status}); try 'show task' or repeat the command."
