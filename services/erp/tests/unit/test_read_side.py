"""The read side (read tools, back-office views, operation status) on the in-memory ledger's ``read``: what is
committed, in SPEC §2 shapes, a missing object ``not_found``; a read tool only for a vouched requester."""

from __future__ import annotations

import pytest

from erpilot_contracts.erp.v1 import (
    CustomerListV1,
    DraftRevisionV1,
    ErpViewV1,
    ExecuteToolV1,
    GetOperationV1,
    OrderV1,
    ProductListV1,
    ProductV1,
)
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_erp.service_layer import backoffice
from erpilot_platform.refusals import InvalidMessage, Refused

from .conftest import SESSION

pytestmark = pytest.mark.unit


def read(desk, tool: str, session_id: str = "S-1", **arguments) -> ExecuteToolV1:
    return ExecuteToolV1(session_id=session_id, call_id="run-desk:c-1", operation_id="op-read", tool=tool,
                         arguments=arguments, requested_by="tester", assertion=desk.assertion(session_id=session_id))


async def test_searches_find_by_id_or_name_in_order(desk):
    found = await desk.reads.run(read(desk, "search_products", query="widget b"))
    everyone = await desk.reads.run(read(desk, "search_customers", query=""))

    assert [p["sku"] for p in found.result["items"]] == ["SKU-B"]
    assert [c["customer_id"] for c in everyone.result["items"]] == ["C-1", "C-2"]


async def test_a_product_and_a_missing_one(desk):
    found = await desk.reads.run(read(desk, "get_product", sku="SKU-A"))
    missing = await desk.reads.run(read(desk, "get_product", sku="SKU-NONE"))

    assert (found.outcome, found.result["on_hand"]) == ("succeeded", 12)
    assert (missing.outcome, missing.error.code, missing.error.status) == ("business_rejected", "not_found", 200)


async def test_a_draft_is_read_in_its_own_session_only_and_paged(desk):
    draft = await desk.new_draft([("SKU-A", 1), ("SKU-B", 2)])

    page = await desk.reads.run(read(desk, "get_draft", draft_id=draft["draft_id"], offset=1, limit=1))
    theirs = await desk.reads.run(read(desk, "get_draft", session_id="S-2", draft_id=draft["draft_id"]))

    assert (page.result["revision"], page.result["latest_revision"], page.result["line_count"]) == (1, 1, 2)
    assert [line["sku"] for line in page.result["lines"]] == ["SKU-B"]
    assert theirs.error.code == "not_found"


async def test_the_order_task_is_the_sessions_one_open_draft(desk):
    none = await desk.reads.run(read(desk, "get_order_task"))
    draft = await desk.new_draft([("SKU-A", 1)])
    one = await desk.reads.run(read(desk, "get_order_task"))
    await desk.new_draft([("SKU-B", 1)])
    two = await desk.reads.run(read(desk, "get_order_task"))

    assert none.result == {"status": "none"}
    assert (one.result["status"], one.result["draft"]["draft_id"]) == ("ok", draft["draft_id"])
    assert two.result["status"] == "ambiguous" and len(two.result["candidates"]) == 2


async def test_a_read_tool_for_another_session_than_its_assertion_is_refused(desk):
    """Another session's draft and order task are not the agent's to ask for with this person's assertion."""
    draft = await desk.new_draft([("SKU-A", 1)])
    cmd = read(desk, "get_draft", draft_id=draft["draft_id"]).model_copy(update={"session_id": "S-2"})

    with pytest.raises(InvalidMessage) as refused:
        await desk.reads.run(cmd)
    assert refused.value.reason == "assertion_session_mismatch"
    with pytest.raises(Refused) as not_read:
        await desk.reads.run(read(desk, "create_order_draft", customer_id="C-1", lines=[{"sku": "SKU-A", "qty": 1}]))
    assert not_read.value.code == "not_a_read_tool"


async def test_back_office_views_show_any_sessions_draft_with_its_session_and_refuse_a_missing_id(desk):
    draft = await desk.new_draft([("SKU-A", 1)])

    shown = await backoffice.view(desk.ledger, ErpViewV1(view="draft", id=draft["draft_id"]))
    products = await backoffice.view(desk.ledger, ErpViewV1(view="products", query="SKU-Z"))
    customers = await backoffice.view(desk.ledger, ErpViewV1(view="customers", query="beta"))
    product = await backoffice.view(desk.ledger, ErpViewV1(view="product", id="SKU-B"))

    assert isinstance(shown.root, DraftRevisionV1) and shown.root.draft_id == draft["draft_id"]
    assert shown.root.latest_revision == 1 and shown.root.lines[0].sku == "SKU-A"
    assert shown.root.session_id == SESSION  # the gateway decides who sees it (SPEC §10)
    assert isinstance(products.root, ProductListV1) and [p.sku for p in products.root.items] == ["SKU-ZERO"]
    assert isinstance(customers.root, CustomerListV1) and [c.customer_id for c in customers.root.items] == ["C-2"]
    assert isinstance(product.root, ProductV1) and product.root.on_hand == 5
    for query, (code, status) in ((ErpViewV1(view="order"), ("invalid_message", 422)),
                                  (ErpViewV1(view="draft", id=draft["draft_id"], revision=7), ("not_found", 404)),
                                  (ErpViewV1(view="order", id="O-404"), ("not_found", 404))):
        with pytest.raises(Refused) as refused:
            await backoffice.view(desk.ledger, query)
        assert (refused.value.code, refused.value.status) == (code, status)


async def test_an_order_view_is_the_order_placed_by_a_commit(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    cmd = await desk.prepared("submit_order", {"draft_id": draft["draft_id"], "revision": 1})
    placed = await desk.commit(cmd)

    order = await backoffice.view(desk.ledger, ErpViewV1(view="order", id=placed.result["order_id"]))
    assert isinstance(order.root, OrderV1)
    assert order.root.model_dump(mode="json")["lines"] == placed.result["lines"]
    assert (order.root.draft_id, order.root.total_amount_minor) == (draft["draft_id"], 2000)
    assert order.root.session_id == SESSION and "session_id" not in placed.result  # its draft's; never the model's


async def test_get_order_and_the_order_view_show_the_orders_credit_notes_oldest_first(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    order_id = (await desk.commit(await desk.prepared("submit_order", {"draft_id": draft["draft_id"],
                                                                       "revision": 1}))).result["order_id"]
    before = await desk.reads.run(read(desk, "get_order", order_id=order_id))
    assert before.result["credit_notes"] == []

    notes = []
    for amount, reason in ((300, "damaged in transit"), (200, "goodwill")):
        cmd = await desk.prepared("issue_credit_note", {"order_id": order_id, "amount_minor": amount,
                                                        "currency": "EUR", "reason": reason})
        notes.append((await desk.commit(cmd)).result)

    found = await desk.reads.run(read(desk, "get_order", order_id=order_id))
    assert found.result["credit_notes"] == notes
    assert [note["remaining_minor"] for note in notes] == [1700, 1500]
    view = await backoffice.view(desk.ledger, ErpViewV1(view="order", id=order_id))
    assert view.root.model_dump(mode="json")["credit_notes"] == notes
    # The order's own fields are as before; only the notes were added.
    assert {key: value for key, value in found.result.items() if key != "credit_notes"} == {
        key: value for key, value in before.result.items() if key != "credit_notes"}


async def test_an_operation_is_seen_as_prepared_then_committed(desk):
    cmd = await desk.prepared("adjust_stock", {"sku": "SKU-A", "delta": -2, "reason": "count"})

    before = await backoffice.get_operation(desk.ledger, GetOperationV1(operation_id=cmd.operation_id))
    await desk.commit(cmd)
    after = await backoffice.get_operation(desk.ledger, GetOperationV1(operation_id=cmd.operation_id))
    with pytest.raises(Refused) as unknown:
        await backoffice.get_operation(desk.ledger, GetOperationV1(operation_id="op-none"))

    assert (before.status, before.call_id, before.pending_id) == ("prepared", cmd.call_id, None)
    assert (after.status, after.decided_by) == ("committed", "approver")
    assert (unknown.value.code, unknown.value.status) == ("not_found", 404)


async def test_a_read_with_the_assertion_of_another_call_is_refused(desk):
    """Issue #32: an assertion vouches for its own call (or its run's calls), not for anything in the session."""
    cmd = read(desk, "search_products", query="widget")
    another = desk.assertion(call_id="call-another", tool="search_products")
    with pytest.raises(InvalidMessage) as refused:
        await desk.reads.run(cmd.model_copy(update={"assertion": another}))
    assert refused.value.reason == "assertion_call_mismatch"
    its_own = desk.assertion(call_id=cmd.call_id, tool=cmd.tool)
    assert (await desk.reads.run(cmd.model_copy(update={"assertion": its_own}))).outcome == "succeeded"


async def test_a_read_with_a_direct_calls_assertion_for_other_arguments_is_refused(desk):
    """Security follow-up of #32: a direct call's assertion names the fingerprint of its arguments; the agent may
    not read something else with it (another draft, another order), as a draft or a prepare may not."""
    cmd = read(desk, "get_product", sku="SKU-A")
    asked = fingerprint("get_product", 1, normalise("get_product", {"sku": "SKU-A"}))
    its_own = desk.assertion(call_id=cmd.call_id, tool=cmd.tool, args=asked)
    other = cmd.model_copy(update={"assertion": its_own, "arguments": {"sku": "SKU-B"}})

    with pytest.raises(InvalidMessage) as refused:
        await desk.reads.run(other)

    assert refused.value.reason == "assertion_args_mismatch"
    assert (await desk.reads.run(cmd.model_copy(update={"assertion": its_own}))).outcome == "succeeded"
    # a run's assertion names no arguments: the model picks them
    assert (await desk.reads.run(other.model_copy(update={"assertion": desk.assertion()}))).outcome == "succeeded"
