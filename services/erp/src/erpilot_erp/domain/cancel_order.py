"""cancel_order: a placed order becomes cancelled and its quantities go back to stock. It never refunds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar

from erpilot_erp.domain.errors import BusinessError, ErrorCode, not_found
from erpilot_erp.domain.model import Order, Product
from erpilot_erp.domain.owners import owned_order
from erpilot_erp.domain.plans import (
    PIECES,
    CommitPlan,
    OrderChange,
    Prepared,
    Rows,
    StockChange,
    WriteState,
    WriteTool,
    effect,
    preview,
)
from erpilot_erp.domain.pricing import format_money


@dataclass(frozen=True)
class CancelOrder:
    """Cancel placed order ``order_id``, with an optional ``reason`` shown in the preview."""

    tool: ClassVar[str] = "cancel_order"
    order_id: str
    reason: str | None = None


def prepare_cancel_order(args: CancelOrder, state: WriteState, now: datetime) -> Prepared:
    """Check the order is the requester's (or the back office's) and placed, and preview the status change, the
    returned stock and the absent refund."""
    mine = owned_order(state.order, requested_by=state.requested_by, order_id=args.order_id)
    order = _placed_order(args.order_id, mine)
    returned = _returned_qty(order)
    products = _products_of(order, state.products)
    facts = {
        "order_id": order.order_id,
        "status": order.status,
        "refunded_minor": order.refunded_minor,
        "returned_qty": returned,
    }
    paid = format_money(order.paid_minor, order.currency)
    remaining = format_money(order.remaining_minor, order.currency)
    notes = [
        f"No refund is issued: the payment of {paid} stays captured ({remaining} still refundable). "
        "Refunding is a separate refund_payment.",
        "Stock is returned on top of whatever is on hand at commit; the figures shown are current.",
    ]
    if args.reason:
        notes.append(f"Reason: {args.reason}")
    return Prepared(
        facts=facts,
        preview=preview(
            operation="Cancel order",
            object=f"Order {order.order_id}",
            target=order.customer_name,
            amount_minor=order.total_amount_minor,
            currency=order.currency,
            effects=[effect("status", "placed", "cancelled")]
            + [
                effect(f"stock {sku}", products[sku].on_hand, products[sku].on_hand + qty, PIECES)
                for sku, qty in returned.items()
            ],
            notes=notes,
            details={
                "order_id": order.order_id,
                "customer_id": order.customer_id,
                "lines": [line.to_result() for line in order.lines],
                "paid_minor": order.paid_minor,
                "refunded_minor": order.refunded_minor,
                "reason": args.reason,
            },
        ),
    )


def commit_cancel_order(
    args: CancelOrder, facts: Mapping[str, Any], state: WriteState, now: datetime
) -> CommitPlan:
    """Re-check the order is still placed and unchanged, then cancel it and return its stock."""
    order = state.order
    if order is None:
        raise not_found("order", args.order_id)
    if order.status != facts["status"] or order.refunded_minor != facts["refunded_minor"]:
        raise BusinessError(
            ErrorCode.ORDER_CHANGED,
            f"order {order.order_id} changed since the preview (status {order.status}, "
            f"refunded {format_money(order.refunded_minor, order.currency)}); nothing was cancelled",
        )
    products = _products_of(order, state.products)
    # Returning stock only adds, so it cannot go wrong if on-hand moved meanwhile: it is not a stale fact.
    stock_changes = tuple(
        StockChange(sku=sku, before=products[sku].on_hand, after=products[sku].on_hand + qty)
        for sku, qty in facts["returned_qty"].items()
    )
    cancelled = replace(order, status="cancelled")
    return CommitPlan(result=cancelled.to_result(), effects=(*stock_changes, OrderChange(cancelled)))


TOOL = WriteTool(
    name=CancelOrder.tool, args=CancelOrder, rows=(Rows.ORDER, Rows.ORDER_PRODUCTS),
    prepare=lambda args, state, now, stock_check: prepare_cancel_order(args, state, now),
    commit=lambda args, facts, state, now, stock_check, new_id: commit_cancel_order(args, facts, state, now),
)


def _placed_order(order_id: str, order: Order | None) -> Order:
    if order is None:
        raise not_found("order", order_id)
    if order.status != "placed":
        raise BusinessError(ErrorCode.ORDER_CHANGED, f"order {order_id} is {order.status}, not placed")
    return order


def _returned_qty(order: Order) -> dict[str, int]:
    returned: dict[str, int] = {}
    for line in order.lines:
        returned[line.sku] = returned.get(line.sku, 0) + line.qty
    return returned


def _products_of(order: Order, products: Mapping[str, Product]) -> Mapping[str, Product]:
    for line in order.lines:
        if line.sku not in products:
            raise not_found("product", line.sku)
    return products
