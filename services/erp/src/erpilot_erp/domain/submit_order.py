"""submit_order: turn a draft's latest revision into a placed, paid order at exactly the quoted prices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from erpilot_erp.domain.errors import BusinessError, ErrorCode, not_found
from erpilot_erp.domain.model import Customer, DraftRevision, Order, OrderLine, Product
from erpilot_erp.domain.owners import owned_draft
from erpilot_erp.domain.plans import (
    PIECES,
    CommitPlan,
    DraftSubmission,
    NewOrder,
    Prepared,
    Rows,
    StockChange,
    StockCheck,
    WriteState,
    WriteTool,
    effect,
    preview,
)
from erpilot_erp.domain.pricing import format_money


@dataclass(frozen=True)
class SubmitOrder:
    """Order revision ``revision`` of draft ``draft_id`` (which must be its latest)."""

    tool: ClassVar[str] = "submit_order"
    draft_id: str
    revision: int


def prepare_submit_order(
    args: SubmitOrder, state: WriteState, now: datetime, stock_check: StockCheck = "exact"
) -> Prepared:
    """Check the revision can be ordered as quoted and preview the order and its stock effects."""
    draft = _submittable(args, state)
    if not draft.lines:
        raise BusinessError(
            ErrorCode.DRAFT_EMPTY, f"draft {draft.draft_id} revision {draft.revision} has no lines to order"
        )
    facts = _quote_facts(draft)
    _check_quote(facts, state.customer, state.products)
    _check_not_expired(facts, now)
    on_hand = {sku: state.products[sku].on_hand for sku in _needed(facts)}
    if stock_check == "exact":
        # Under "exact" the commit will demand the stock the quote saw, so a moved stock can never pass.
        quoted = {line.sku: line.stock_before for line in draft.lines}
        for sku, now_on_hand in on_hand.items():
            if now_on_hand != quoted[sku]:
                raise _stock_changed(sku, quoted[sku], now_on_hand, "edit the draft to quote current stock")
    for sku, qty in _needed(facts).items():
        if on_hand[sku] < qty:
            raise BusinessError(
                ErrorCode.INSUFFICIENT_STOCK, f"{sku}: {qty} ordered but only {on_hand[sku]} on hand", sku=sku
            )
    facts["stock_before"] = on_hand
    return Prepared(facts=facts, preview=_preview(draft, facts, stock_check))


def commit_submit_order(
    args: SubmitOrder, facts: Mapping[str, Any], state: WriteState, now: datetime, *, order_id: str,
    stock_check: StockCheck = "exact",
) -> CommitPlan:
    """Re-check every fact the preview showed, then place order ``order_id`` and take its stock."""
    latest = state.latest_draft
    if latest is None or latest.revision != facts["revision"] or not latest.is_open:
        raise BusinessError(
            ErrorCode.DRAFT_CHANGED,
            f"draft {facts['draft_id']} is no longer open at revision {facts['revision']}; "
            "nothing was ordered",
        )
    _check_quote(facts, state.customer, state.products)
    _check_not_expired(facts, now)
    stock_changes = _take_stock(facts, state.products, stock_check)
    order = Order(
        order_id=order_id,
        customer_id=facts["customer_id"],
        customer_name=facts["customer_name"],
        status="placed",
        lines=tuple(
            OrderLine(
                sku=line["sku"],
                name=line["name"],
                qty=line["qty"],
                unit_price_minor=line["unit_price_minor"],
                line_total_minor=line["line_total_minor"],
            )
            for line in facts["lines"]
        ),
        total_amount_minor=facts["total_amount_minor"],
        currency=facts["currency"],
        paid_minor=facts["total_amount_minor"],  # the demo payment is captured when the order is placed
        refunded_minor=0,
        created_at=now,
        draft_id=facts["draft_id"],
        revision=facts["revision"],
        session_id=latest.session_id,
        owner=latest.owner,  # the order is the draft owner's
    )
    return CommitPlan(
        result=order.to_result(),
        effects=(*stock_changes, NewOrder(order), DraftSubmission(facts["draft_id"], facts["revision"], order_id)),
    )


TOOL = WriteTool(
    name=SubmitOrder.tool, args=SubmitOrder, rows=(Rows.DRAFT,), new_id_kind="order",
    prepare=prepare_submit_order,
    commit=lambda args, facts, state, now, stock_check, new_id: commit_submit_order(
        args, facts, state, now, order_id=str(new_id), stock_check=stock_check),
)


def _submittable(args: SubmitOrder, state: WriteState) -> DraftRevision:
    latest = owned_draft(state.latest_draft, session_id=state.session_id, requested_by=state.requested_by,
                         draft_id=args.draft_id)
    if not latest.is_open:
        raise BusinessError(ErrorCode.DRAFT_CLOSED, f"draft {args.draft_id} was already submitted")
    if args.revision > latest.revision:
        raise not_found("draft revision", f"{args.draft_id}/{args.revision}")
    if args.revision != latest.revision:
        raise BusinessError(
            ErrorCode.DRAFT_CHANGED,
            f"draft {args.draft_id} is at revision {latest.revision}; revision {args.revision} is outdated",
            latest_revision=latest.revision,
        )
    return latest


def _quote_facts(draft: DraftRevision) -> dict[str, Any]:
    """What the quote promised, in JSON: commit compares the catalog against exactly these values."""
    return {
        "draft_id": draft.draft_id,
        "revision": draft.revision,
        "customer_id": draft.customer_id,
        "customer_name": draft.customer_name,
        "currency": draft.currency,
        "total_amount_minor": draft.total_amount_minor,
        "valid_until": draft.valid_until.isoformat(),
        "lines": [
            {
                "sku": line.sku,
                "name": line.name,
                "qty": line.qty,
                "unit_price_minor": line.unit_price_minor,
                "discount_pct": line.discount_pct,
                "line_total_minor": line.line_total_minor,
            }
            for line in draft.lines
        ],
    }


def _check_quote(
    facts: Mapping[str, Any], customer: Customer | None, products: Mapping[str, Product]
) -> None:
    if customer is None:
        raise not_found("customer", facts["customer_id"])
    changes: list[str] = []
    for line in facts["lines"]:
        sku, product = line["sku"], products.get(line["sku"])
        if product is None:
            changes.append(f"{sku} is no longer in the catalog")
            continue
        if not product.is_active:
            changes.append(f"{sku} is discontinued")
        if (product.price_minor, product.currency) != (line["unit_price_minor"], facts["currency"]):
            quoted = format_money(line["unit_price_minor"], facts["currency"])
            current = format_money(product.price_minor, product.currency)
            changes.append(f"{sku} price {quoted} is now {current}")
        if product.name != line["name"]:
            changes.append(f"{sku} name {line['name']!r} is now {product.name!r}")
        if customer.discount_pct != line["discount_pct"]:
            changes.append(f"{sku} discount {line['discount_pct']}% is now {customer.discount_pct}%")
    if changes:
        raise BusinessError(
            ErrorCode.QUOTE_CHANGED,
            "the quote no longer matches the catalog (" + "; ".join(dict.fromkeys(changes)) + "); "
            "edit the draft to re-quote it",
            changes=list(dict.fromkeys(changes)),
        )


def _check_not_expired(facts: Mapping[str, Any], now: datetime) -> None:
    if now > datetime.fromisoformat(facts["valid_until"]):
        raise BusinessError(
            ErrorCode.QUOTE_EXPIRED,
            f"the quote of draft {facts['draft_id']} revision {facts['revision']} expired at "
            f"{facts['valid_until']}; edit the draft to re-quote it",
        )


def _needed(facts: Mapping[str, Any]) -> dict[str, int]:
    """Quantity per SKU in line order (a SKU may appear on several lines)."""
    needed: dict[str, int] = {}
    for line in facts["lines"]:
        needed[line["sku"]] = needed.get(line["sku"], 0) + line["qty"]
    return needed


def _take_stock(
    facts: Mapping[str, Any], products: Mapping[str, Product], stock_check: StockCheck
) -> tuple[StockChange, ...]:
    changes = []
    for sku, qty in _needed(facts).items():
        on_hand, shown = products[sku].on_hand, facts["stock_before"][sku]
        if stock_check == "exact" and on_hand != shown:
            raise _stock_changed(sku, shown, on_hand, "nothing was ordered")
        if stock_check == "sufficient" and on_hand < qty:
            raise _stock_changed(sku, shown, on_hand, f"it no longer covers {qty}")
        if on_hand - qty < 0:  # the last guard: stock never goes negative, whatever the facts say
            raise BusinessError(
                ErrorCode.INSUFFICIENT_STOCK, f"{sku}: {qty} ordered but only {on_hand} on hand", sku=sku
            )
        changes.append(StockChange(sku=sku, before=on_hand, after=on_hand - qty))
    return tuple(changes)


def _stock_changed(sku: str, shown: int, on_hand: int, consequence: str) -> BusinessError:
    return BusinessError(
        ErrorCode.STOCK_CHANGED,
        f"on-hand of {sku} was {shown} when quoted and is {on_hand} now; {consequence}",
        sku=sku, stock_before=shown, on_hand=on_hand,
    )


def _preview(draft: DraftRevision, facts: Mapping[str, Any], stock_check: StockCheck) -> dict[str, Any]:
    total = format_money(draft.total_amount_minor, draft.currency)
    discount = draft.lines[0].discount_pct
    summary = f"{len(draft.lines)} line(s) for {draft.customer_name} ({draft.customer_id}), total {total}"
    notes = [
        summary + (f" after the customer's {discount}% discount on every line" if discount else ""),
        f"The payment of {total} is captured when the order is placed.",
        # UTC in words; the approval page shows details.valid_until in the viewer's own time zone.
        f"Prices are quoted until {_utc_text(facts['valid_until'])}.",
        "Commits only if on-hand is still exactly as shown." if stock_check == "exact"
        else "Commits if on-hand still covers every line.",
    ]
    return preview(
        operation="Submit order",
        object=f"Draft {draft.draft_id} revision {draft.revision}",
        target=draft.customer_name,
        amount_minor=draft.total_amount_minor,
        currency=draft.currency,
        effects=[
            effect(f"stock {sku}", facts["stock_before"][sku], facts["stock_before"][sku] - qty, PIECES)
            for sku, qty in _needed(facts).items()
        ],
        notes=notes,
        details={
            "draft_id": draft.draft_id,
            "revision": draft.revision,
            "customer_id": draft.customer_id,
            "customer_name": draft.customer_name,
            "lines": [line.to_result() for line in draft.lines],
            "note": draft.note,
            "valid_until": facts["valid_until"],
            "stock_check": stock_check,
        },
    )


def _utc_text(iso: str) -> str:
    """``2026-10-19T12:00:00+00:00`` -> ``2026-10-19 12:00 UTC`` (a note people read, not a machine value)."""
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
