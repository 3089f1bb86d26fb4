"""refund_payment: return part or all of an order's captured payment through its original channel.

What is refundable is the payment less earlier refunds, and no more than the order's total less refunds and the
credit notes issued against it (``Order.refundable_minor``): a refund and a credit note both give the customer money
back, and together never more than the order was worth. Commit checks it again on the locked order and its notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar

from erpilot_erp.domain.errors import BusinessError, ErrorCode, ToolErrorCode, not_found
from erpilot_erp.domain.model import CreditNote, Order, Refund
from erpilot_erp.domain.owners import owned_order
from erpilot_erp.domain.plans import (
    CommitPlan,
    NewRefund,
    OrderChange,
    Prepared,
    Rows,
    WriteState,
    WriteTool,
    effect,
    preview,
)
from erpilot_erp.domain.pricing import format_money

REFUND_EXCEEDS_REMAINING = ToolErrorCode(
    "refund_exceeds_remaining", "The refund is larger than what is still refundable (paid minus already refunded).")


@dataclass(frozen=True)
class RefundPayment:
    """Refund ``amount_minor`` in ``currency`` of order ``order_id`` through ``channel`` (the original one)."""

    tool: ClassVar[str] = "refund_payment"
    order_id: str
    amount_minor: int
    currency: str
    channel: str


def prepare_refund_payment(args: RefundPayment, state: WriteState, now: datetime) -> Prepared:
    """Check the order is the requester's (or the back office's), currency and refundable remainder, and preview
    remaining before -> after."""
    order, refundable = _refundable(args, owned_order(state.order, requested_by=state.requested_by,
                                                      order_id=args.order_id), state.row_set(Rows.ORDER_CREDIT_NOTES))
    facts = {
        "order_id": order.order_id,
        "currency": order.currency,
        "paid_minor": order.paid_minor,
        "refunded_minor": order.refunded_minor,
        "remaining_minor": refundable,
    }
    after = refundable - args.amount_minor
    return Prepared(
        facts=facts,
        preview=preview(
            operation="Refund payment",
            object=f"Order {order.order_id}",
            target=order.customer_name,
            amount_minor=args.amount_minor,
            currency=args.currency,
            effects=[
                effect("refundable remaining", refundable, after, order.currency),
                effect("refunded", order.refunded_minor, order.refunded_minor + args.amount_minor, order.currency),
            ],
            notes=[
                f"Refund {format_money(args.amount_minor, args.currency)} to the original payment channel.",
                f"Afterwards {format_money(after, order.currency)} of the "
                f"{format_money(order.paid_minor, order.currency)} paid stays refundable.",
                f"The order is {order.status}; a refund does not change its status or stock.",
            ],
            details={
                "order_id": order.order_id,
                "customer_id": order.customer_id,
                "order_status": order.status,
                "channel": args.channel,
                "paid_minor": order.paid_minor,
                "refunded_minor": order.refunded_minor,
                "total_amount_minor": order.total_amount_minor,
            },
        ),
    )


def commit_refund_payment(
    args: RefundPayment, facts: Mapping[str, Any], state: WriteState, now: datetime, *, refund_id: str
) -> CommitPlan:
    """Re-check the remainder still covers the amount and nothing was refunded meanwhile, then refund."""
    order, refundable = _refundable(args, state.order, state.row_set(Rows.ORDER_CREDIT_NOTES))
    if order.refunded_minor != facts["refunded_minor"]:
        shown = format_money(facts["refunded_minor"], order.currency)
        raise BusinessError(
            ErrorCode.ORDER_CHANGED,
            f"order {order.order_id} was refunded meanwhile (refunded {shown} in the preview, "
            f"{format_money(order.refunded_minor, order.currency)} now); nothing was refunded",
        )
    refunded = replace(order, refunded_minor=order.refunded_minor + args.amount_minor)
    refund = Refund(
        refund_id=refund_id,
        order_id=order.order_id,
        amount_minor=args.amount_minor,
        currency=args.currency,
        channel=args.channel,
        remaining_minor=refundable - args.amount_minor,
        created_at=now,
    )
    return CommitPlan(result=refund.to_result(), effects=(OrderChange(refunded), NewRefund(refund)))


TOOL = WriteTool(
    name=RefundPayment.tool, args=RefundPayment, rows=(Rows.ORDER, Rows.ORDER_CREDIT_NOTES), new_id_kind="refund",
    prepare=lambda args, state, now, stock_check: prepare_refund_payment(args, state, now),
    commit=lambda args, facts, state, now, stock_check, new_id: commit_refund_payment(
        args, facts, state, now, refund_id=str(new_id)),
    error_codes=(REFUND_EXCEEDS_REMAINING,),
)


def _refundable(args: RefundPayment, order: Order | None, credit_notes: tuple[CreditNote, ...]
                ) -> tuple[Order, int]:
    """The order and what is still refundable on it, if ``amount_minor`` in ``currency`` fits into it."""
    if order is None:
        raise not_found("order", args.order_id)
    if args.currency != order.currency:
        raise BusinessError(
            ErrorCode.CURRENCY_MISMATCH,
            f"order {order.order_id} was paid in {order.currency}, not {args.currency}",
        )
    refundable = order.refundable_minor(credit_notes)
    if args.amount_minor > refundable:
        raise BusinessError(
            REFUND_EXCEEDS_REMAINING,
            f"only {format_money(refundable, order.currency)} of order {order.order_id} is refundable (the payment "
            f"less refunds, at most its total less refunds and credit notes); "
            f"{format_money(args.amount_minor, args.currency)} requested",
            remaining_minor=refundable,
        )
    return order, refundable
