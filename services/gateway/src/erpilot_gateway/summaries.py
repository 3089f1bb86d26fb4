"""One line about a tool's result, as people read it: the console's only rendering of a result (the approval page
and the session stream, whose ``tool_finished`` events carry it as ``summary``; the page's script shows that text
and builds none of its own). Shared by the edges, so it knows none of them.

The shape is chosen by the tool's result kind (a catalog trait), never by its name or by the result's own keys.
"""

from __future__ import annotations

import json
from typing import Any

from erpilot_contracts.money import format_minor
from erpilot_contracts.tools.v1 import TOOLS, ResultKind


def money(minor: Any, currency: str | None) -> str:
    """Integer minor units as major units and the currency code: ``1,234.50 EUR``, ``1,234 JPY``.

    Two decimals, or the currency's ISO 4217 exponent where it differs (JPY 0, KWD 3; ``erpilot_contracts.money``).
    """
    if type(minor) is not int:
        return "" if minor is None else str(minor)
    return format_minor(minor, currency)


def plain(value: Any) -> str:
    """A value of a preview or result as text: scalars as they are, structures as compact JSON."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def result_summary(tool: str, result: dict[str, Any] | None) -> str:
    """One line about a result, by the tool's result kind (a catalog trait): the order, document (refund, credit
    note), product, draft or listing it produced. The console's one rendering of a result (the page's script
    shows this text, it does not build its own)."""
    if not isinstance(result, dict):
        return ""
    spec = TOOLS.get(tool)
    kind = spec.traits.result_kind if spec is not None else None
    currency = result.get("currency")
    if kind is not None and kind.document:
        return (f"{kind.label} {result.get(kind.id_key)} of {money(result.get('amount_minor'), currency)} on order "
                f"{result.get('order_id')}; {money(result.get('remaining_minor'), currency)} remains {kind.remains}")
    if kind is ResultKind.ORDER and "order_id" in result:
        return _joined(f"Order {result['order_id']}", result, "status", "total_amount_minor", "paid_minor")
    if kind is ResultKind.PRODUCT and "sku" in result:
        return f"{result['sku']}: on hand now {result.get('on_hand')}"
    if kind is ResultKind.DRAFT and "draft_id" in result:
        return _joined(f"Draft {result['draft_id']} revision {result.get('revision')}", result, "customer_name",
                       "total_amount_minor")
    if kind is ResultKind.TASK:
        return _task_summary(result)
    if kind is ResultKind.LISTING and isinstance(result.get("items"), list):
        return f"{len(result['items'])} item(s)"
    return plain(result)


def _joined(head: str, result: dict[str, Any], *keys: str) -> str:
    """``head · value · total 12.00 EUR · …``: each of ``keys`` the result has (amounts named, with currency)."""
    parts = [head]
    for key in keys:
        value = result.get(key)
        if key.endswith("_minor") and key in result:
            parts.append(f"{key.removesuffix('_minor').removesuffix('_amount')} {money(value, result.get('currency'))}")
        elif value:
            parts.append(str(value))
    return " · ".join(parts)


def _task_summary(task: dict[str, Any]) -> str:
    draft = task.get("draft") if isinstance(task.get("draft"), dict) else {}
    if task.get("status") == "ok":
        return f"Open draft {draft.get('draft_id')} revision {draft.get('revision')}"
    if task.get("status") == "ambiguous" and isinstance(task.get("candidates"), list):
        return f"{len(task['candidates'])} open drafts"
    return "No open draft" if task.get("status") == "none" else plain(task)


def with_summary(event: dict[str, Any], tools: dict[str, str]) -> dict[str, Any]:
    """A session event as the console gets it: a succeeded ``tool_finished`` gains its result's ``summary``.

    ``tools`` maps call ids to tool names, from the ``tool_started`` events seen so far on the stream (updated
    here); a call whose start came before the stream began gets no summary rather than a guessed one.
    """
    data = event.get("data") if isinstance(event.get("data"), dict) else {}
    if event.get("type") == "tool_started" and isinstance(data.get("tool"), str):
        tools[str(data.get("call_id"))] = data["tool"]
    if event.get("type") != "tool_finished" or not isinstance(data.get("result"), dict):
        return event
    tool = tools.get(str(data.get("call_id")))
    if tool is None or tool not in TOOLS or data["result"].get("omitted") is True:  # too large: shown by its link
        return event
    return {**event, "data": {**data, "summary": result_summary(tool, data["result"])}}
