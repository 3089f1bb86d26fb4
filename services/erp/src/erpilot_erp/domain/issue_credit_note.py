"""issue_credit_note: credit a customer an amount against a placed order, at most what is still creditable.

What is creditable is the order's total less what was refunded and what earlier credit notes credited: a customer
is never owed more than the order was worth. A credit note moves no stock and refunds nothing. Commit checks the
limit again on the locked order (its credit notes are only ever inserted under that lock), so two notes approved
side by side can never together exceed it; a note that still fits after another one was issued commits, because
what the approver approved, an amount against that order, still holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from erpilot_erp.domain.errors import BusinessError, ErrorCode, ToolErrorCode, not_found
from erpilot_erp.domain.model import CreditNote, Order
from erpilot_erp.domain.owners import owned_order
from erpilot_erp.domain.plans import (
    CommitPlan,
    Effect,
    Prepared,
    Rows,
    StockCheck,
    WriteState,
    WriteTool,
    effect,
    preview,
)
from erpilot_erp.domain.pricing import format_money

CREDIT_EXCEEDS_REMAINING = ToolErrorCode(
    "credit_exceeds_remaining",
    "The credit note is larger than what is still creditable (the order's total less refunds and earlier credit "
    "notes).")


@dataclass(frozen=True)
class NewCreditNote(Effect):
    """Insert credit note ``note`` (recorded with the committing operation's id): the effect of this tool alone,
    applied by ``adapters.records.credit_notes``."""

    note: CreditNote


@dataclass(frozen=True)
class IssueCreditNote:
    """Credit ``amount_minor`` in ``currency`` against order ``order_id``, for ``reason``."""

    tool: ClassVar[str] = "issue_credit_note"
    order_id: str
    amount_minor: int
    currency: str
    reason: str


def prepare_issue_credit_note(args: IssueCreditNote, state: WriteState, now: datetime,
                              stock_check: StockCheck = "exact") -> Prepared:
    """Check the order is the requester's (or the back office's), placed, in the currency and with room for the
    amount; preview creditable before -> after."""
    order = owned_order(state.order, requested_by=state.requested_by, order_id=args.order_id)
    remaining = _creditable(args, order, state.row_set(Rows.ORDER_CREDIT_NOTES))
    after = remaining - args.amount_minor
    credited = order.total_amount_minor - order.refunded_minor - remaining
    return Prepared(
        facts={"order_id": args.order_id, "currency": args.currency, "remaining_minor": remaining},
        preview=preview(
            operation="Issue credit note",
            object=f"Credit note on order {args.order_id}",
            target=order.customer_name,
            amount_minor=args.amount_minor,
            currency=args.currency,
            effects=[effect("creditable remaining", remaining, after, args.currency),
                     effect("credited", credited, credited + args.amount_minor, args.currency)],
            notes=[f"Credit {format_money(args.amount_minor, args.currency)} to the customer; no money is paid "
                   "out now and no stock moves.",
                   f"Afterwards {format_money(after, args.currency)} of the order stays creditable "
                   "(its total less refunds and credit notes).",
                   f"Reason: {args.reason}"],
            details={"order_id": args.order_id, "customer_id": order.customer_id,
                     "total_amount_minor": order.total_amount_minor, "refunded_minor": order.refunded_minor,
                     "credited_minor": credited, "reason": args.reason},
        ),
    )


def commit_issue_credit_note(args: IssueCreditNote, facts: Mapping[str, Any], state: WriteState, now: datetime,
                             stock_check: StockCheck = "exact", new_id: str | None = None) -> CommitPlan:
    """Re-check on the locked order that it is still placed and the amount still fits, then issue ``new_id``."""
    if not new_id:
        raise ValueError("issue_credit_note needs a new credit_note id")
    remaining = _creditable(args, state.order, state.row_set(Rows.ORDER_CREDIT_NOTES))
    note = CreditNote(credit_note_id=new_id, order_id=args.order_id, amount_minor=args.amount_minor,
                      currency=args.currency, reason=args.reason, remaining_minor=remaining - args.amount_minor,
                      created_at=now)
    return CommitPlan(result=note.to_result(), effects=(NewCreditNote(note),))


TOOL = WriteTool(name=IssueCreditNote.tool, args=IssueCreditNote, rows=(Rows.ORDER, Rows.ORDER_CREDIT_NOTES),
                 prepare=prepare_issue_credit_note, commit=commit_issue_credit_note, new_id_kind="credit_note",
                 error_codes=(CREDIT_EXCEEDS_REMAINING,))


def _creditable(args: IssueCreditNote, order: Order | None, credit_notes: tuple[CreditNote, ...]) -> int:
    """What is still creditable on the order, if ``amount_minor`` in ``currency`` fits into it."""
    if order is None:
        raise not_found("order", args.order_id)
    if order.status != "placed":
        raise BusinessError(ErrorCode.ORDER_CHANGED, f"order {order.order_id} is {order.status}, not placed; "
                                                     "no credit note was issued")
    if args.currency != order.currency:
        raise BusinessError(ErrorCode.CURRENCY_MISMATCH,
                            f"order {order.order_id} is in {order.currency}, not {args.currency}")
    remaining = order.creditable_minor(credit_notes)
    if args.amount_minor > remaining:
        raise BusinessError(
            CREDIT_EXCEEDS_REMAINING,
            f"only {format_money(remaining, order.currency)} of order {order.order_id} is creditable (its total "
            f"less refunds and credit notes); {format_money(args.amount_minor, args.currency)} requested",
            remaining_minor=remaining,
        )
    return remaining
