"""PREPARE and COMMIT of the four write tools, behind one entry point each for the adapter.

prepare: called when the agent asks for a preview; the adapter stores ``Prepared.facts`` with the
operation and returns ``Prepared.preview``. commit: called in the commit's transaction after the grant is
verified, with the rows of ``WriteState`` locked; the adapter applies the ``CommitPlan`` and records its
``result``, or records the ``BusinessError`` as the operation's rejection.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from erpilot_erp.domain.adjust_stock import AdjustStock, commit_adjust_stock, prepare_adjust_stock
from erpilot_erp.domain.cancel_order import CancelOrder, commit_cancel_order, prepare_cancel_order
from erpilot_erp.domain.plans import CommitPlan, Prepared, StockCheck, WriteState
from erpilot_erp.domain.refund_payment import RefundPayment, commit_refund_payment, prepare_refund_payment
from erpilot_erp.domain.submit_order import SubmitOrder, commit_submit_order, prepare_submit_order

Write = SubmitOrder | CancelOrder | AdjustStock | RefundPayment
"""What one write asks for (the service layer maps a write tool's arguments to it)."""

WRITE_TOOLS = frozenset(write.tool for write in (SubmitOrder, CancelOrder, AdjustStock, RefundPayment))

NEW_ID_KIND: Mapping[str, str] = {"submit_order": "order", "refund_payment": "refund"}
"""Write tools whose commit creates a record, and which kind of id the adapter must pass as ``new_id``."""


def prepare(write: Write, state: WriteState, now: datetime, *, stock_check: StockCheck = "exact") -> Prepared:
    """Check what can never succeed, and return the facts and preview of one write."""
    if isinstance(write, SubmitOrder):
        return prepare_submit_order(write, state, now, stock_check)
    if isinstance(write, CancelOrder):
        return prepare_cancel_order(write, state, now)
    if isinstance(write, AdjustStock):
        return prepare_adjust_stock(write, state, now)
    if isinstance(write, RefundPayment):
        return prepare_refund_payment(write, state, now)
    raise ValueError(f"{write!r} is not a write")


def commit(
    write: Write, facts: Mapping[str, Any], state: WriteState, now: datetime, *,
    stock_check: StockCheck = "exact", new_id: str | None = None,
) -> CommitPlan:
    """Re-check the prepared ``facts`` against ``state`` and plan the effects (``new_id``: NEW_ID_KIND)."""
    if not isinstance(write, SubmitOrder | CancelOrder | AdjustStock | RefundPayment):
        raise ValueError(f"{write!r} is not a write")
    if write.tool in NEW_ID_KIND and not new_id:
        raise ValueError(f"{write.tool} needs a new {NEW_ID_KIND[write.tool]} id")
    if isinstance(write, SubmitOrder):
        return commit_submit_order(write, facts, state, now, order_id=str(new_id), stock_check=stock_check)
    if isinstance(write, CancelOrder):
        return commit_cancel_order(write, facts, state, now)
    if isinstance(write, AdjustStock):
        return commit_adjust_stock(write, facts, state, now)
    return commit_refund_payment(write, facts, state, now, refund_id=str(new_id))
