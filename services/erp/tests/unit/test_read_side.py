"""The read side (read tools, back-office views, operation status) on the in-memory ledger's read port:
what is committed, in SPEC §2 shapes, a missing object ``not_found``."""

from __future__ import annotations

import pytest

from erpilot_contracts.erp.v1 import ErpViewV1, ExecuteToolV1, GetOperationV1, GetPreparedOperationV1
from erpilot_erp.adapters.memory_ledger import MemoryLedgerReads
from erpilot_erp.service_layer import backoffice
from erpilot_erp.service_layer.reads import run_read_tool

pytestmark = pytest.mark.unit


@pytest.fixture
def reads(desk) -> MemoryLedgerReads:
    return MemoryLedgerReads(desk.ledger)


def read(tool: str, session_id: str = "S-1", **arguments) -> ExecuteToolV1:
    return ExecuteToolV1(session_id=session_id, call_id="c-1", operation_id="op-read", tool=tool,
                         arguments=arguments, requested_by="tester")


async def test_searches_find_by_id_or_name_in_order(reads):
    found = await run_read_tool(reads, read("search_products", query="widget b"))
    everyone = await run_read_tool(reads, read("search_customers", query=""))

    assert [p["sku"] for p in found.result["items"]] == ["SKU-B"]
    assert [c["customer_id"] for c in everyone.result["items"]] == ["C-1", "C-2"]


async def test_a_product_and_a_missing_one(reads):
    found = await run_read_tool(reads, read("get_product", sku="SKU-A"))
    missing = await run_read_tool(reads, read("get_product", sku="SKU-NONE"))

    assert (found.outcome, found.result["on_hand"]) == ("succeeded", 12)
    assert (missing.outcome, missing.error.code, missing.error.status) == ("business_rejected", "not_found", 200)


async def test_a_draft_is_read_in_its_own_session_only_and_paged(desk, reads):
    draft = await desk.new_draft([("SKU-A", 1), ("SKU-B", 2)])

    page = await run_read_tool(reads, read("get_draft", draft_id=draft["draft_id"], offset=1, limit=1))
    theirs = await run_read_tool(reads, read("get_draft", session_id="S-2", draft_id=draft["draft_id"]))

    assert (page.result["revision"], page.result["latest_revision"], page.result["line_count"]) == (1, 1, 2)
    assert [line["sku"] for line in page.result["lines"]] == ["SKU-B"]
    assert theirs.error.code == "not_found"


async def test_the_order_task_is_the_sessions_one_open_draft(desk, reads):
    none = await run_read_tool(reads, read("get_order_task"))
    draft = await desk.new_draft([("SKU-A", 1)])
    one = await run_read_tool(reads, read("get_order_task"))
    await desk.new_draft([("SKU-B", 1)])
    two = await run_read_tool(reads, read("get_order_task"))

    assert none.result == {"status": "none"}
    assert (one.result["status"], one.result["draft"]["draft_id"]) == ("ok", draft["draft_id"])
    assert two.result["status"] == "ambiguous" and len(two.result["candidates"]) == 2


async def test_back_office_views_show_any_sessions_draft_and_refuse_a_missing_id(desk, reads):
    draft = await desk.new_draft([("SKU-A", 1)])

    shown = await backoffice.view(reads, ErpViewV1(view="draft", id=draft["draft_id"]))
    products = await backoffice.view(reads, ErpViewV1(view="products", query="SKU-Z"))
    no_id = await backoffice.view(reads, ErpViewV1(view="order"))
    missing = await backoffice.view(reads, ErpViewV1(view="draft", id=draft["draft_id"], revision=7))

    assert shown.ok and shown.data["draft_id"] == draft["draft_id"]
    assert [p["sku"] for p in products.data["items"]] == ["SKU-ZERO"]
    assert (no_id.error.code, no_id.error.status) == ("invalid_message", 422)
    assert (missing.error.code, missing.error.status) == ("not_found", 404)


async def test_an_operation_is_seen_as_prepared_then_committed(desk, reads):
    cmd = await desk.prepared("adjust_stock", {"sku": "SKU-A", "delta": -2, "reason": "count"})

    prepared = await backoffice.get_prepared(reads, GetPreparedOperationV1(operation_id=cmd.operation_id))
    before = await backoffice.get_operation(reads, GetOperationV1(operation_id=cmd.operation_id))
    await desk.commit(cmd)
    after = await backoffice.get_operation(reads, GetOperationV1(operation_id=cmd.operation_id))
    unknown = await backoffice.get_operation(reads, GetOperationV1(operation_id="op-none"))

    assert (prepared.data["fingerprint"], prepared.data["status"]) == (cmd.fingerprint, "prepared")
    assert (before.data["status"], after.data["status"]) == ("prepared", "committed")
    assert (unknown.error.code, unknown.error.status) == ("not_found", 404)
