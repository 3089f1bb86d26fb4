"""Read tools, back-office views, operation status and the product change, over NATS."""

from __future__ import annotations

import pytest

from erpilot_contracts import subjects

pytestmark = pytest.mark.integration


async def read(erp, tool, arguments, session_id):
    return await erp.send(subjects.ERP_QUERY_READ, erp.read_cmd(tool, arguments, session_id=session_id), durable=False)


async def test_get_order_task_is_none_ok_or_ambiguous(erp, session_id):
    customer = await erp.make_customer()
    sku = await erp.make_product()
    assert (await read(erp, "get_order_task", {}, session_id)).data["result"] == {"status": "none"}

    first = await erp.new_draft(session_id, customer, [(sku, 1)])
    ok = (await read(erp, "get_order_task", {}, session_id)).data["result"]
    second = await erp.new_draft(session_id, customer, [(sku, 2)])
    ambiguous = (await read(erp, "get_order_task", {}, session_id)).data["result"]

    assert ok == {"status": "ok", "draft": first}
    assert ambiguous == {"status": "ambiguous", "candidates": [
        {"draft_id": d["draft_id"], "revision": 1, "customer_id": customer, "total_amount_minor":
         d["total_amount_minor"]} for d in (first, second)]}
    assert (await read(erp, "get_order_task", {}, "S-other")).data["result"] == {"status": "none"}
    unvouched = erp.read_cmd("get_order_task", {}, session_id="S-other").model_copy(
        update={"assertion": erp.read_cmd("get_order_task", {}, session_id=session_id).assertion})
    refused = await erp.send(subjects.ERP_QUERY_READ, unvouched, durable=False)
    assert (refused.error.code, refused.error.details) == ("invalid_message", {"reason": "assertion_session_mismatch"})


async def test_get_draft_is_private_to_its_session_but_not_in_the_back_office(erp, session_id):
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(await erp.make_product(), 1)])

    mine = await read(erp, "get_draft", {"draft_id": draft["draft_id"]}, session_id)
    theirs = await read(erp, "get_draft", {"draft_id": draft["draft_id"]}, "S-other")
    office = await erp.view("draft", id=draft["draft_id"], revision=1)

    assert {**mine.data["result"], "session_id": session_id, "owner": "tester"} == {**office.data, "line_count": 1}
    # who may see it: the gateway's decision
    assert office.data == {**draft, "latest_revision": 1, "session_id": session_id, "owner": "tester"}
    assert theirs.data["outcome"] == "business_rejected" and theirs.data["error"]["code"] == "not_found"


async def test_searches_match_a_substring_of_id_or_name_case_insensitively(erp):
    sku = await erp.make_product()
    by_name = await erp.view("products", query=f"  TEST ITEM {sku.lower()} ")
    customer = await erp.make_customer()
    by_id = await erp.view("customers", query=customer.lower())
    everything = await erp.view("products")
    tool = await read(erp, "search_products", {"query": "BALLPOINT"}, "S-x")

    assert [p["sku"] for p in by_name.data["items"]] == [sku]
    assert by_id.data["items"] == [{"customer_id": customer, "name": f"Customer {customer}", "discount_pct": 0}]
    assert 0 < len(everything.data["items"]) <= 50
    assert [p["sku"] for p in tool.data["result"]["items"]] == ["SKU-PEN-BLUE"]


@pytest.mark.parametrize(("view", "kw"), [
    ("product", {"id": "SKU-NOPE"}), ("order", {"id": "O-0"}), ("draft", {"id": "D-0"}),
    ("draft", {"id": "D-1001", "revision": 999}),
])
async def test_unknown_objects_are_not_found(erp, view, kw):
    reply = await erp.view(view, **kw)
    assert not reply.ok and reply.error.code == "not_found" and reply.error.status == 404


async def test_views_of_a_product_and_a_seeded_order(erp):
    product = await erp.view("product", id="SKU-PEN-BLUE")
    order = await erp.view("order", id="O-5001")

    assert set(product.data) == {"sku", "name", "status", "price_minor", "currency", "on_hand"}
    assert order.data["order_id"] == "O-5001" and order.data["paid_minor"] >= order.data["refunded_minor"]
    assert order.data["session_id"] is None and order.data["owner"] is None  # the back office's history
    assert set(order.data["lines"][0]) == {"sku", "name", "qty", "unit_price_minor", "line_total_minor"}


async def test_unknown_operation_is_not_found(erp):
    reply = await erp.operation("op-unknown")
    assert not reply.ok and reply.error.code == "not_found" and reply.error.status == 404


async def test_update_product_changes_price_and_status(erp):
    sku = await erp.make_product(price_minor=900)

    price = await erp.update_product(sku, price_minor=950)
    status = await erp.update_product(sku, status="discontinued")
    unknown = await erp.update_product("SKU-NOPE", price_minor=1)
    negative = await erp.update_product(sku, price_minor=-1)
    nothing = await erp.update_product(sku)

    assert price.data["price_minor"] == 950 and status.data["status"] == "discontinued"
    assert status.data == (await erp.view("product", id=sku)).data
    assert not unknown.ok and unknown.error.code == "not_found" and unknown.error.status == 404
    assert not negative.ok and negative.error.status == 422
    assert not nothing.ok and nothing.error.status == 422


async def test_a_500_line_draft_is_read_in_pages_and_edited_by_line_number(erp, session_id):
    skus = [await erp.make_product(on_hand=1000, price_minor=100 + n) for n in range(5)]
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(skus[n % 5], 1 + n % 7) for n in range(200)])
    for n in range(200, 500):
        reply = await erp.draft("add_draft_line", {"draft_id": draft["draft_id"], "base_revision": n - 199,
                                                   "sku": skus[n % 5], "qty": 1 + n % 7}, session_id=session_id)
        assert reply.data["outcome"] == "succeeded", reply
    draft_id, revision = draft["draft_id"], 301

    whole = (await read(erp, "get_draft", {"draft_id": draft_id}, session_id)).data["result"]
    page = (await read(erp, "get_draft", {"draft_id": draft_id, "offset": 310, "limit": 10}, session_id)).data
    past = (await read(erp, "get_draft", {"draft_id": draft_id, "offset": 500, "limit": 10}, session_id)).data
    too_big = await read(erp, "get_draft", {"draft_id": draft_id, "limit": 201}, session_id)

    assert (whole["revision"], whole["line_count"], len(whole["lines"])) == (revision, 500, 500)
    result = page["result"]
    assert [line["item_number"] for line in result["lines"]] == list(range(311, 321))
    assert (result["line_count"], result["offset"], result["limit"]) == (500, 310, 10)
    assert result["total_amount_minor"] == whole["total_amount_minor"] and result["lines"] == whole["lines"][310:320]
    assert past["result"]["lines"] == [] and past["result"]["line_count"] == 500
    assert not too_big.ok and too_big.error.code == "invalid_arguments"

    line = result["lines"][6]  # item 317
    edited = await erp.draft("update_draft_line", {"draft_id": draft_id, "base_revision": revision,
                                                   "item_number": 317, "expected_sku": line["sku"], "qty": 2},
                             session_id=session_id)
    assert edited.data["outcome"] == "succeeded", edited
    after = (await read(erp, "get_draft", {"draft_id": draft_id, "offset": 316, "limit": 1}, session_id)).data
    assert after["result"]["revision"] == revision + 1 and after["result"]["lines"][0]["qty"] == 2
    assert after["result"]["lines"][0]["sku"] == line["sku"]
