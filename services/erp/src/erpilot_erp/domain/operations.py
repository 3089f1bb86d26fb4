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

from erpilot_erp.domain.adjust_stock import commit_adjust_stock, prepare_adjust_stock
from erpilot_erp.domain.arguments import parse_args
from erpilot_erp.domain.cancel_order import commit_cancel_order, prepare_cancel_order
from erpilot_erp.domain.plans import CommitPlan, Prepared, StockCheck, WriteState
from erpilot_erp.domain.refund_payment import commit_refund_payment, prepare_refund_payment
from erpilot_erp.domain.submit_order import commit_submit_order, prepare_submit_order

WRITE_TOOLS = frozenset({"submit_order", "cancel_order", "adjust_stock", "refund_payment"})

NEW_ID_KIND: Mapping[str, str] = {"submit_order": "order", "refund_payment": "refund"}
"""Write tools whose commit creates a record, and which kind of id the adapter must pass as ``new_id``."""


def prepare(
    tool: str, arguments: Mapping[str, Any], state: WriteState, now: datetime, *,
    stock_check: StockCheck = "exact",
) -> Prepared:
    """Validate, check what can never succeed, and return the facts and preview of one write."""
    args: Any = parse_args(_write_tool(tool), arguments)
    if tool == "submit_order":
        return prepare_submit_order(args, state, now, stock_check)
    if tool == "cancel_order":
        return prepare_cancel_order(args, state, now)
    if tool == "adjust_stock":
        return prepare_adjust_stock(args, state, now)
    return prepare_refund_payment(args, state, now)


def commit(
    tool: str, arguments: Mapping[str, Any], facts: Mapping[str, Any], state: WriteState, now: datetime, *,
    stock_check: StockCheck = "exact", new_id: str | None = None,
) -> CommitPlan:
    """Re-check the prepared ``facts`` against ``state`` and plan the effects (``new_id``: NEW_ID_KIND)."""
    args: Any = parse_args(_write_tool(tool), arguments)
    if tool in NEW_ID_KIND and not new_id:
        raise ValueError(f"{tool} needs a new {NEW_ID_KIND[tool]} id")
    if tool == "submit_order":
        return commit_submit_order(args, facts, state, now, order_id=str(new_id), stock_check=stock_check)
    if tool == "cancel_order":
        return commit_cancel_order(args, facts, state, now)
    if tool == "adjust_stock":
        return commit_adjust_stock(args, facts, state, now)
    return commit_refund_payment(args, facts, state, now, refund_id=str(new_id))


def _write_tool(tool: str) -> str:
    if tool not in WRITE_TOOLS:
        raise ValueError(f"{tool} is not a write tool")
    return tool
