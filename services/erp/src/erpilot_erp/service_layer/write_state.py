"""Loading the rows a write tool declares (``WriteTool.rows``) into its ``plans.WriteState``.

Lock order, everywhere: operation row -> draft or order row -> product rows in SKU order. Keeping one
order is what makes concurrent commits deadlock-free (the operation is locked by the caller first). Every
tool's rows are loaded here in that order, whatever order it declares them in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from erpilot_erp.domain.operations import write_tool
from erpilot_erp.domain.plans import Rows, WriteState
from erpilot_erp.service_layer.ports import LedgerRepository


async def write_state(repo: LedgerRepository, tool: str, args: Mapping[str, Any], session_id: str, *,
                      requested_by: str | None, facts: Mapping[str, Any] | None = None,
                      lock: bool = False) -> WriteState:
    """The rows ``tool`` needs for ``requested_by``, locked in the documented order when ``lock``."""
    rows = write_tool(tool).rows
    latest = customer = order = None
    skus: set[str] = set()
    row_sets: dict[Rows, tuple[Any, ...]] = {}
    if Rows.DRAFT in rows:
        latest = await repo.latest_draft(args["draft_id"], lock=lock)
        skus |= {line.sku for line in latest.lines} if latest else set()
        skus |= {line["sku"] for line in (facts or {}).get("lines", [])}
        customer = await repo.customer(latest.customer_id) if latest else None
    if Rows.ORDER in rows:
        order = await repo.order(args["order_id"], lock=lock)
        if order is not None and Rows.ORDER_PRODUCTS in rows:
            skus |= {line.sku for line in order.lines}
        if order is not None:  # after the order's lock: a fresh snapshot, in the Rows order (a stable one)
            for kind in (kind for kind in Rows if kind.of_order and kind in rows):
                row_sets[kind] = tuple(await repo.row_set(kind, order.order_id))
    if Rows.PRODUCT in rows:
        skus.add(args["sku"])
    return WriteState(session_id, requested_by=requested_by, latest_draft=latest, customer=customer, order=order,
                      products=await repo.products_by_sku(skus, lock=lock), row_sets=row_sets)
