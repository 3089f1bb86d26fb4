"""What the approval page shows, as plain data: the templates and the page's script render the same views.

Everything here returns strings and lists for display; escaping is the renderer's job (Jinja2 autoescape
on the server, ``textContent`` in the browser).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

STATUS_LABELS = {
    "pending": "Pending",
    "approved": "Approved",
    "rejected": "Rejected",
    "cancelled": "Cancelled",
    "expired": "Expired",
    "superseded": "Superseded",
}

# Preview effects carry bare numbers; these labels name amounts of money (in the preview's currency).
_MONEY_WORDS = ("refund", "paid", "amount", "total", "remaining", "price")


def money(minor: Any, currency: str | None) -> str:
    """Integer minor units as major units with two decimals and the currency code: ``1,234.50 EUR``."""
    if type(minor) is not int:
        return "" if minor is None else str(minor)
    sign = "-" if minor < 0 else ""
    major, cents = divmod(abs(minor), 100)
    return f"{sign}{major:,}.{cents:02d} {currency or ''}".rstrip()


def parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def when(value: Any) -> str:
    """A timestamp as people read it, in UTC to the second."""
    moment = parse_time(value)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ""


def iso(value: Any) -> str:
    moment = parse_time(value)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds") if moment else ""


def plain(value: Any) -> str:
    """A value of a preview or result as text: scalars as they are, structures as compact JSON."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)


def effect_rows(preview: dict[str, Any]) -> list[dict[str, str]]:
    currency = preview.get("currency")
    rows = []
    for effect in preview.get("effects") or []:
        if not isinstance(effect, dict):
            continue
        label = str(effect.get("label", ""))
        is_money = currency and any(word in label.lower() for word in _MONEY_WORDS)

        def show(value: Any, is_money: bool = bool(is_money)) -> str:
            return money(value, currency) if is_money and type(value) is int else plain(value)

        rows.append({"label": label, "before": show(effect.get("before")), "after": show(effect.get("after"))})
    return rows


def draft_view(details: dict[str, Any], currency: str | None) -> dict[str, Any] | None:
    """The draft revision and its lines of a submit_order preview (``preview.details``)."""
    lines = details.get("lines")
    if not isinstance(lines, list):
        return None
    rows = []
    for line in lines:
        if not isinstance(line, dict):
            continue
        discount = line.get("discount_pct")
        rows.append({
            "item_number": plain(line.get("item_number")),
            "sku": plain(line.get("sku")),
            "name": plain(line.get("name")),
            "qty": plain(line.get("qty")),
            "unit_price": money(line.get("unit_price_minor"), currency),
            "discount": f"{discount}%" if discount not in (None, 0, "0") else "—",
            "line_total": money(line.get("line_total_minor"), currency),
            "stock_before": plain(line.get("stock_before")),
        })
    customer = details.get("customer_name")
    if details.get("customer_id"):
        customer = f"{customer or ''} ({details['customer_id']})".strip()
    return {
        "draft_id": plain(details.get("draft_id")),
        "revision": plain(details.get("revision")),
        "customer": customer or "—",
        "note": details.get("note") or "",
        "valid_until": when(details.get("valid_until")) or plain(details.get("valid_until")),
        "stock_check": plain(details.get("stock_check")) if details.get("stock_check") else "",
        "lines": rows,
    }


def other_details(details: dict[str, Any]) -> list[dict[str, str]]:
    """Tool-specific preview details other than draft lines, as label/value rows."""
    skip = {"lines", "draft_id", "revision", "customer_id", "customer_name", "note", "valid_until", "stock_check"}
    has_draft = isinstance(details.get("lines"), list)
    return [{"label": str(key).replace("_", " "), "value": plain(value)}
            for key, value in details.items() if not (has_draft and key in skip)]


def result_summary(tool: str, result: dict[str, Any] | None) -> str:
    """One line about a committed result: the order, refund or product it produced."""
    if not isinstance(result, dict):
        return ""
    currency = result.get("currency")
    if "refund_id" in result:
        return (f"Refund {result['refund_id']} of {money(result.get('amount_minor'), currency)} on order "
                f"{result.get('order_id')}; {money(result.get('remaining_minor'), currency)} remains refundable")
    if "order_id" in result:
        parts = [f"Order {result['order_id']}"]
        if result.get("status"):
            parts.append(str(result["status"]))
        if "total_amount_minor" in result:
            parts.append(f"total {money(result.get('total_amount_minor'), currency)}")
        if "paid_minor" in result:
            parts.append(f"paid {money(result.get('paid_minor'), currency)}")
        return " · ".join(parts)
    if "sku" in result and "on_hand" in result:
        return f"{result['sku']}: on hand now {result['on_hand']}"
    return plain(result)


def decision_view(record: dict[str, Any]) -> dict[str, str]:
    """The decision as recorded by the approval service."""
    status = record.get("status", "")
    by, at, comment = record.get("decided_by"), when(record.get("decided_at")), record.get("comment") or ""
    if status == "pending":
        headline = "Waiting for a decision"
    elif status == "expired":
        headline = f"Expired at {when(record.get('expires_at'))} without a decision"
    elif status == "superseded":
        headline = "Superseded by an edited version" + (f" (edited by {by})" if by else "")
    else:
        headline = f"{STATUS_LABELS.get(status, status)}" + (f" by {by}" if by else "") + (f" at {at}" if at else "")
    return {"status": status, "label": STATUS_LABELS.get(status, status), "headline": headline,
            "comment": comment, "superseded_by": record.get("superseded_by") or ""}


def outcome_view(record: dict[str, Any], operation: dict[str, Any] | None) -> dict[str, str] | None:
    """The business outcome: was the operation executed? ``state`` is one of waiting, done,
    business_rejected, not_executed, unknown; None while the approval is still pending or superseded.
    """
    status = record.get("status")
    if status in ("rejected", "cancelled", "expired"):
        return {"state": "not_executed", "title": "Not executed",
                "detail": f"The approval was {status}; the operation was not carried out and changed nothing."}
    if status != "approved":
        return None
    if operation is None:
        return {"state": "unknown", "title": "Approved — business outcome not available",
                "detail": "The ERP did not answer about this operation; the requester's session shows the result."}
    op_status = operation.get("status")
    if op_status == "committed":
        return {"state": "done", "title": "Done — executed",
                "detail": result_summary(str(record.get("tool", "")), operation.get("result"))}
    if op_status == "rejected":
        error = operation.get("error") or {}
        return {"state": "business_rejected", "title": "Business rejected — not executed",
                "detail": f"{error.get('code', 'rejected')}: {error.get('message', '')}".rstrip(": ")}
    return {"state": "waiting", "title": "Approved — not executed yet",
            "detail": "Waiting for the agent to commit the operation to the ERP."}
