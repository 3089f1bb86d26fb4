"""PREPARE and COMMIT of the write tools, dispatched through one table: ``WRITE_TOOLS``.

Each write tool is one module exporting one ``plans.WriteTool`` (``TOOL``): its arguments, the rows it reads and
locks, its prepare and commit and the kind of id its commit creates. Registering it here is what makes the
dispatchers (``prepare``, ``commit``, ``service_layer.write_state``, ``service_layer.to_domain``) know it; none of
them names a tool.

prepare: called when the agent asks for a preview; the adapter stores ``Prepared.facts`` with the
operation and returns ``Prepared.preview``. commit: called in the commit's transaction after the grant is
verified, with the rows of ``WriteState`` locked; the adapter applies the ``CommitPlan``'s effects and records its
``result``, or records the ``BusinessError`` as the operation's rejection.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from erpilot_erp.domain import adjust_stock, cancel_order, issue_credit_note, refund_payment, submit_order
from erpilot_erp.domain.plans import CommitPlan, Prepared, StockCheck, WriteState, WriteTool

WRITE_TOOLS: Mapping[str, WriteTool[Any]] = {
    tool.name: tool
    for tool in (submit_order.TOOL, cancel_order.TOOL, adjust_stock.TOOL, refund_payment.TOOL, issue_credit_note.TOOL)
}

NEW_ID_KIND: Mapping[str, str] = {name: tool.new_id_kind for name, tool in WRITE_TOOLS.items() if tool.new_id_kind}
"""Write tools whose commit creates a record, and which kind of id the adapter must pass as ``new_id``."""


def write_tool(name: str) -> WriteTool[Any]:
    """The registered write tool (ValueError for any other name)."""
    tool = WRITE_TOOLS.get(name)
    if tool is None:
        raise ValueError(f"{name} is not a write tool")
    return tool


def _tool_of(write: object) -> WriteTool[Any]:
    tool = WRITE_TOOLS.get(getattr(write, "tool", ""))
    if tool is None or not isinstance(write, tool.args):
        raise ValueError(f"{write!r} is not a write")
    return tool


def prepare(write: Any, state: WriteState, now: datetime, *, stock_check: StockCheck = "exact") -> Prepared:
    """Check what can never succeed, and return the facts and preview of one write."""
    return _tool_of(write).prepare(write, state, now, stock_check)


def commit(
    write: Any, facts: Mapping[str, Any], state: WriteState, now: datetime, *,
    stock_check: StockCheck = "exact", new_id: str | None = None,
) -> CommitPlan:
    """Re-check the prepared ``facts`` against ``state`` and plan the effects (``new_id``: NEW_ID_KIND)."""
    tool = _tool_of(write)
    if tool.new_id_kind and not new_id:
        raise ValueError(f"{tool.name} needs a new {tool.new_id_kind} id")
    return tool.commit(write, facts, state, now, stock_check, new_id)
