"""The draft tools (``DraftService``) on the in-memory ledger: one revision per call, exactly once per
``operation_id``, a business rejection answered (and remembered) as ``business_rejected``."""

from __future__ import annotations

import pytest

from erpilot_contracts.erp.v1 import UpdateProductV1

pytestmark = pytest.mark.unit

CREATE = {"customer_id": "C-1", "lines": [{"sku": "SKU-A", "qty": 2}]}


async def test_create_makes_revision_one_of_a_new_draft(desk):
    reply = await desk.drafts.handle(desk.draft_cmd("create_order_draft", CREATE))

    assert reply.ok and reply.data["outcome"] == "succeeded"
    assert reply.data["result"]["draft_id"] == "D-1"
    assert reply.data["result"]["revision"] == 1
    assert desk.state.drafts["D-1"].session_id == "S-1"
    assert list(desk.state.drafts["D-1"].revisions) == [1]


async def test_a_redelivered_create_gets_the_first_answer_and_makes_no_second_draft(desk):
    cmd = desk.draft_cmd("create_order_draft", CREATE, operation_id="op-create")
    first = await desk.drafts.handle(cmd)
    again = await desk.drafts.handle(cmd)

    assert again == first
    assert list(desk.state.drafts) == ["D-1"]
    assert desk.state.inbox["draft:op-create"]["reply"] == first.model_dump(mode="json")


async def test_an_operation_id_reused_for_other_arguments_is_a_conflict(desk):
    await desk.drafts.handle(desk.draft_cmd("create_order_draft", CREATE, operation_id="op-x"))
    other = CREATE | {"lines": [{"sku": "SKU-B", "qty": 1}]}
    reply = await desk.drafts.handle(desk.draft_cmd("create_order_draft", other, operation_id="op-x"))

    assert not reply.ok and (reply.error.code, reply.error.status) == ("operation_conflict", 409)
    assert list(desk.state.drafts) == ["D-1"]


async def test_an_edit_on_the_latest_revision_makes_the_next_one(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    reply = await desk.drafts.handle(desk.draft_cmd(
        "set_draft_note", {"draft_id": draft["draft_id"], "base_revision": 1, "note": "ring twice"}))

    assert reply.data["outcome"] == "succeeded"
    assert reply.data["result"]["revision"] == 2
    assert reply.data["result"]["note"] == "ring twice"
    assert sorted(desk.state.drafts[draft["draft_id"]].revisions) == [1, 2]


async def test_an_edit_on_an_older_revision_is_rejected_and_the_rejection_is_remembered(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    note = {"draft_id": draft["draft_id"], "base_revision": 1}
    await desk.drafts.handle(desk.draft_cmd("set_draft_note", note | {"note": "first"}))
    stale = desk.draft_cmd("set_draft_note", note | {"note": "second"})

    reply = await desk.drafts.handle(stale)
    assert reply.ok and reply.data["outcome"] == "business_rejected"
    assert reply.data["error"]["code"] == "draft_changed"
    assert sorted(desk.state.drafts[draft["draft_id"]].revisions) == [1, 2]
    assert await desk.drafts.handle(stale) == reply


async def test_a_draft_for_an_unknown_customer_is_rejected_without_a_draft(desk):
    reply = await desk.drafts.handle(desk.draft_cmd("create_order_draft", CREATE | {"customer_id": "C-404"}))

    assert reply.ok and reply.data["outcome"] == "business_rejected"
    assert reply.data["error"]["code"] == "not_found"
    assert desk.state.drafts == {}


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    ("submit_order", {"draft_id": "D-1", "revision": 1}, "not_a_draft_tool"),
    ("create_order_draft", {"customer_id": "C-1", "lines": []}, "invalid_arguments"),
])
async def test_what_is_not_a_valid_draft_call_is_refused_before_the_ledger(desk, tool, arguments, code):
    reply = await desk.drafts.handle(desk.draft_cmd(tool, arguments))

    assert not reply.ok and (reply.error.code, reply.error.status) == (code, 422)
    assert desk.ledger.commits == 0


async def test_a_product_change_is_applied_once_per_request_id(desk):
    change = UpdateProductV1(sku="SKU-A", price_minor=1200, updated_by="admin", request_id="rq-1")
    first = await desk.products.update(change)
    again = await desk.products.update(change)
    reused = await desk.products.update(change.model_copy(update={"price_minor": 1300}))

    assert first.ok and first.data["price_minor"] == 1200
    assert again == first
    assert not reused.ok and reused.error.code == "operation_conflict"
    assert desk.state.products["SKU-A"].price_minor == 1200
