"""Read tools (SPEC §2): no effects, answered from committed state, each one statement (``Ledger.read``).

Every read comes from a session's tool call: the requester's assertion is checked as for a draft, its arguments
included (a direct call's assertion names their fingerprint: the agent may not read something else with it). A
draft, the
session's order task and an order are read only by their owner, the vouched requester (``domain.owners``; an order
no session made is the back office's, which every requester reads); anyone else gets ``not_found``.
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts.base import ErrorV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, ToolResultV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_erp.domain.owners import may_use_draft, may_use_order
from erpilot_erp.domain.plans import Rows
from erpilot_erp.domain.reads import get_order_task, listing, page_draft
from erpilot_erp.service_layer.messages import order_result
from erpilot_erp.service_layer.ports import Ledger, Work
from erpilot_erp.service_layer.replies import normalised
from erpilot_erp.service_layer.requesters import Clock, Requesters, utc_now
from erpilot_platform.refusals import Refused


def _found(result: dict[str, Any] | None, what: str) -> ToolResultV1:
    if result is None:
        return ToolResultV1(outcome="business_rejected",
                            error=ErrorV1(code="not_found", message=f"{what} not found", status=200))
    return ToolResultV1(outcome="succeeded", result=result)


class ReadTools:
    """``query.erp.read``: one read tool for one session's requester."""

    def __init__(self, ledger: Ledger, requesters: Requesters, *, clock: Clock = utc_now):
        self.unit = ledger
        self.requesters = requesters
        self.clock = clock

    async def run(self, cmd: ExecuteToolV1) -> ToolResultV1:
        args = normalised(cmd.tool, cmd.arguments)
        if get_tool(cmd.tool).kind is not ToolKind.READ:
            raise Refused("not_a_read_tool", f"{cmd.tool} is not a read tool", 422)
        self.requesters.vouch(cmd.assertion, session_id=cmd.session_id, call_id=cmd.call_id, tool=cmd.tool,
                              requested_by=cmd.requested_by, at=self.clock(),
                              args=fingerprint(cmd.tool, get_tool(cmd.tool).schema_version, args))
        return await self.unit.read(lambda unit: _read(unit, cmd.tool, args, cmd.session_id, cmd.requested_by))


async def _read(unit: Work, tool: str, args: dict[str, Any], session_id: str, requested_by: str) -> ToolResultV1:
    match tool:
        case "search_customers":
            return _found(listing(await unit.ledger.search_customers(args["query"])), "customers")
        case "search_products":
            return _found(listing(await unit.ledger.search_products(args["query"])), "products")
        case "get_product":
            found = (await unit.ledger.products_by_sku([args["sku"]])).get(args["sku"])
            return _found(found.to_result() if found else None, f"product {args['sku']}")
        case "get_order":
            order = await unit.ledger.order(args["order_id"])
            if order is None or not may_use_order(order, requested_by):
                # another person's order reads as one that does not exist
                return _found(None, f"order {args['order_id']}")
            return _found(order_result(order, await unit.ledger.row_set(Rows.ORDER_CREDIT_NOTES, order.order_id)),
                          f"order {args['order_id']}")
        case "get_draft":
            stored = await unit.ledger.draft_revision(args["draft_id"], args.get("revision"))
            draft = None
            # a draft is its session's and its owner's only
            if stored is not None and may_use_draft(stored.revision, session_id=session_id, requested_by=requested_by):
                draft = page_draft({**stored.revision.to_result(), "latest_revision": stored.latest_revision},
                                   args.get("offset"), args.get("limit"))
            return _found(draft, f"draft {args['draft_id']}")
        case "get_order_task":
            return _found(get_order_task(await unit.ledger.open_drafts(session_id), session_id, requested_by), "task")
    raise ValueError(f"{tool} is not a read tool")
