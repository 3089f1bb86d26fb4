"""Read tools (SPEC §2): no effects, answered from the current state."""

from __future__ import annotations

from typing import Any

from erpilot_contracts.base import ErrorV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, ToolResultV1
from erpilot_erp.domain.reads import get_order_task, page_draft
from erpilot_erp.service_layer.ports import LedgerReads


def _found(result: dict[str, Any] | None, what: str) -> ToolResultV1:
    if result is None:
        return ToolResultV1(outcome="business_rejected",
                            error=ErrorV1(code="not_found", message=f"{what} not found", status=200))
    return ToolResultV1(outcome="succeeded", result=result)


async def run_read_tool(reads: LedgerReads, cmd: ExecuteToolV1) -> ToolResultV1:
    """Dispatch one read tool; unknown tools here are a programming error of the caller."""
    args = cmd.arguments
    match cmd.tool:
        case "search_customers":
            return _found(await reads.search_customers(args["query"]), "customers")
        case "search_products":
            return _found(await reads.search_products(args["query"]), "products")
        case "get_product":
            return _found(await reads.product(args["sku"]), f"product {args['sku']}")
        case "get_order":
            return _found(await reads.order(args["order_id"]), f"order {args['order_id']}")
        case "get_draft":
            draft = await reads.draft_revision(args["draft_id"], args.get("revision"), cmd.session_id)
            if draft is not None:
                draft = page_draft(draft, args.get("offset"), args.get("limit"))
            return _found(draft, f"draft {args['draft_id']}")
        case "get_order_task":
            return _found(get_order_task(await reads.open_drafts(cmd.session_id), cmd.session_id), "task")
    raise ValueError(f"{cmd.tool} is not a read tool")
