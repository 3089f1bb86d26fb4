"""Loading the rows a write tool needs (``plans.WriteState``) through the ledger's repository.

Lock order, everywhere: operation row -> draft or order row -> product rows in SKU order. Keeping one
order is what makes concurrent commits deadlock-free (the operation is locked by the caller first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from erpilot_erp.domain.plans import WriteState
from erpilot_erp.service_layer.ports import LedgerRepository


async def write_state(repo: LedgerRepository, tool: str, args: Mapping[str, Any], session_id: str, *,
                      requested_by: str | None, facts: Mapping[str, Any] | None = None,
                      lock: bool = False) -> WriteState:
    """The rows ``tool`` needs for ``requested_by``, locked in the documented order when ``lock``."""
    if tool == "submit_order":
        latest = await repo.latest_draft(args["draft_id"], lock=lock)
        skus = {line.sku for line in latest.lines} if latest else set()
        skus |= {line["sku"] for line in (facts or {}).get("lines", [])}
        who = await repo.customer(latest.customer_id) if latest else None
        return WriteState(session_id, requested_by=requested_by, latest_draft=latest, customer=who,
                          products=await repo.products_by_sku(skus, lock=lock))
    if tool in ("cancel_order", "refund_payment"):
        found = await repo.order(args["order_id"], lock=lock)
        skus = {line.sku for line in found.lines} if found and tool == "cancel_order" else set()
        return WriteState(session_id, requested_by=requested_by, order=found,
                          products=await repo.products_by_sku(skus, lock=lock))
    if tool == "adjust_stock":
        return WriteState(session_id, requested_by=requested_by,
                          products=await repo.products_by_sku([args["sku"]], lock=lock))
    raise ValueError(f"{tool} is not a write tool")
