"""What the approval page shows, as plain data: the templates and the page's script render the same views.

The decision, quorum and outcome are read from the contracts' reply models (``ApprovalRecordV1``,
``OperationStatusV1``), the preview from its ``PreviewV1``; the preview's ``details`` are the ERP's free-form
JSON (``dict``) and are read defensively, since each tool puts its own keys there.

Everything here returns strings and lists for display; escaping is the renderer's job (Jinja2 autoescape
on the server, ``textContent`` in the browser).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from erpilot_contracts.approval.v1 import ApprovalRecordV1
from erpilot_contracts.erp.v1 import OperationStatusV1, PreviewV1
from erpilot_contracts.tools.v1 import TOOLS, ToolKind
from erpilot_gateway.summaries import money, plain, result_summary

STATUS_LABELS = {
    "pending": "Pending",
    "approved": "Approved",
    "rejected": "Rejected",
    "cancelled": "Cancelled",
    "expired": "Expired",
    "superseded": "Superseded",
}

# Why a person may not decide (the approval record's ``cannot_decide_reason``), as the page says it.
CANNOT_DECIDE_TEXT = {
    "separation_of_duties": "You requested or edited this operation, so under separation of duties another "
                            "person must approve it. You may still reject it.",
    "already_decided": "This approval was already decided; there is nothing left to decide.",
    "expired": "This approval has expired; it can no longer be decided.",
    "superseded": "This version was superseded by an edit; decide the new version instead.",
    "withdrawn": "The requester withdrew this approval; there is nothing left to decide.",
    "already_voted": "You have voted on this approval; it waits for the other approvals it needs.",
}
PIECES = "pcs"
WRITE_TOOLS = tuple(name for name, spec in TOOLS.items() if spec.kind is ToolKind.WRITE)  # what a delegation covers


def acts_on_draft(tool: str) -> bool:
    """The write acts on a draft revision (its ``object_key`` trait), so its preview's details hold the draft."""
    spec = TOOLS.get(tool)
    return spec is not None and spec.kind is ToolKind.WRITE and spec.traits.object_key == "draft_id"


def cannot_decide_text(reason: str | None, required_roles: list[str], roles: list[str]) -> str:
    """The sentence the page and the inbox show instead of a button that would be refused."""
    if reason == "role":
        return (f"You do not have a role that may decide this approval: it needs one of {', '.join(required_roles)}; "
                f"you hold {', '.join(roles) or 'no role'}.")
    return CANNOT_DECIDE_TEXT.get(reason or "", "")


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


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)


def effect_rows(preview: PreviewV1) -> list[dict[str, str]]:
    """Effects with their unit as the ERP states it: ``pcs`` counts, a currency code (minor units) money,
    no unit a state. Nothing is guessed from a label."""
    rows = []
    for effect in preview.effects:
        unit = effect.unit or None

        def show(value: Any, unit: str | None = unit) -> str:
            if type(value) is not int or unit is None:
                return plain(value)
            return f"{value:,} {unit}" if unit == PIECES else money(value, unit)

        rows.append({"label": effect.label, "before": show(effect.before), "after": show(effect.after),
                     "unit": unit or ""})
    return rows


def draft_view(details: dict[str, Any], currency: str | None) -> dict[str, Any] | None:
    """The draft revision and its lines of the preview of a write on a draft (``preview.details``)."""
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
        "valid_until_iso": iso(details.get("valid_until")),
        "stock_check": plain(details.get("stock_check")) if details.get("stock_check") else "",
        "lines": rows,
    }


def other_details(details: dict[str, Any], currency: str | None = None) -> list[dict[str, str]]:
    """Tool-specific preview details other than draft lines, as label/value rows.

    An integer under a ``*_minor`` key (the contracts' name for money) is shown as money in the details'
    own ``currency``, else the preview's; without a currency it stays the bare number it is.
    """
    skip = {"lines", "draft_id", "revision", "customer_id", "customer_name", "note", "valid_until", "stock_check"}
    has_draft = isinstance(details.get("lines"), list)
    currency = details.get("currency") if isinstance(details.get("currency"), str) else currency
    rows = []
    for key, value in details.items():
        if has_draft and key in skip:
            continue
        name = str(key)
        if name.endswith("_minor") and currency and isinstance(value, int) and not isinstance(value, bool):
            rows.append({"label": name.removesuffix("_minor").replace("_", " "), "value": money(value, currency)})
        else:
            rows.append({"label": name.replace("_", " "), "value": plain(value)})
    return rows


def decided_by_text(by: str | None, on_behalf_of: str | None) -> str:
    """Who decided, as people read it: "ana", or "ana for bob" when ana decided as bob's delegate."""
    if not by:
        return ""
    return f"{by} for {on_behalf_of}" if on_behalf_of else by


def decision_view(record: ApprovalRecordV1) -> dict[str, str]:
    """The decision as recorded by the approval service; ``at`` (ISO, UTC) is when it ended, which the
    page shows in the viewer's time zone (``at_text`` is the UTC fallback without script)."""
    status, comment = record.status, record.comment or ""
    by = decided_by_text(record.decided_by, record.decided_on_behalf_of)
    at = record.expires_at if status == "expired" else record.decided_at
    if status == "pending":
        headline, at = "Waiting for a decision", None
    elif status == "expired":
        headline = "Expired without a decision"
    elif status == "superseded":
        headline = "Superseded by an edited version" + (f" (edited by {by})" if by else "")
    else:
        headline = f"{STATUS_LABELS.get(status, status)}" + (f" by {by}" if by else "")
    return {"status": status, "label": STATUS_LABELS.get(status, status), "headline": headline,
            "at": iso(at), "at_text": when(at),
            "comment": comment, "superseded_by": record.superseded_by or ""}


def quorum_view(record: ApprovalRecordV1) -> dict[str, Any]:
    """A quorum approval's count and votes as the approval page polls them (``at`` ISO, ``at_text`` UTC)."""
    votes = [{"sub": v.sub, "on_behalf_of": v.on_behalf_of or "", "who": decided_by_text(v.sub, v.on_behalf_of),
              "role": v.role, "action": v.action, "at": iso(v.at), "at_text": when(v.at), "comment": v.comment or ""}
             for v in record.votes]
    return {"approvals_required": record.approvals_required or 1,
            "approvals_received": record.approvals_received or 0, "votes": votes}


def escalation_view(record: ApprovalRecordV1) -> dict[str, str] | None:
    """An escalated approval's escalation (None: not escalated): the role it gained and when."""
    if record.escalated_at is None:
        return None
    return {"to": record.escalate_to or "", "at": iso(record.escalated_at), "at_text": when(record.escalated_at)}


def outcome_view(record: ApprovalRecordV1, operation: OperationStatusV1 | None) -> dict[str, str] | None:
    """The business outcome: was the operation executed? ``state`` is one of waiting, done,
    business_rejected, not_executed, unknown; None while the approval is still pending or superseded.
    """
    status = record.status
    if status in ("rejected", "cancelled", "expired"):
        return {"state": "not_executed", "title": "Not executed",
                "detail": f"The approval was {status}; the operation was not carried out and changed nothing."}
    if status != "approved":
        return None
    if operation is None:
        return {"state": "unknown", "title": "Approved — business outcome not available",
                "detail": "The ERP did not answer about this operation; the requester's session shows the result."}
    if operation.status == "committed":
        return {"state": "done", "title": "Done — executed",
                "detail": result_summary(record.tool, operation.result)}
    if operation.status == "rejected":
        error = operation.error
        return {"state": "business_rejected", "title": "Business rejected — not executed",
                "detail": f"{error.code}: {error.message}".rstrip(": ") if error else "rejected"}
    return {"state": "waiting", "title": "Approved — not executed yet",
            "detail": "Waiting for the agent to commit the operation to the ERP."}
