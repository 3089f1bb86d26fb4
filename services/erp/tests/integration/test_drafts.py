"""Draft tools over NATS: new revisions, stale edits, idempotency by operation_id, stored rejections."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from sqlalchemy import text

pytestmark = pytest.mark.integration


async def test_create_order_draft_returns_revision_one_priced_from_the_catalog(erp, session_id):
    sku = await erp.make_product(on_hand=9, price_minor=333)
    customer = await erp.make_customer(discount_pct=10)

    reply = await erp.draft("create_order_draft", {"customer_id": customer, "lines": [{"sku": sku, "qty": 3}],
                                                   "note": "ring twice"}, session_id=session_id)

    assert reply.ok and reply.data["outcome"] == "succeeded"
    draft = reply.data["result"]
    assert draft["draft_id"].startswith("D-") and int(draft["draft_id"][2:]) >= 1001
    assert (draft["revision"], draft["status"], draft["note"]) == (1, "open", "ring twice")
    assert (draft["customer_id"], draft["customer_name"], draft["currency"]) == (customer, f"Customer {customer}",
                                                                                 "EUR")
    assert draft["lines"] == [{"item_number": 1, "sku": sku, "name": f"Test item {sku}", "qty": 3,
                               "unit_price_minor": 333, "discount_pct": 10, "line_total_minor": 899,
                               "stock_before": 9}]
    assert draft["total_amount_minor"] == 899
    view = (await erp.view("draft", id=draft["draft_id"])).data
    # the session and the owner: for the gateway alone
    assert view == {**draft, "latest_revision": 1, "session_id": session_id, "owner": "tester"}


async def test_a_redelivered_create_makes_one_draft_and_gives_the_same_answer(erp, session_id):
    sku = await erp.make_product()
    cmd = erp.draft_cmd("create_order_draft", {"customer_id": await erp.make_customer(),
                                               "lines": [{"sku": sku, "qty": 1}]}, session_id=session_id)

    replies = [await erp.send("erpilot.v1.req.erp.draft", cmd)]
    replies += await asyncio.gather(*(erp.send("erpilot.v1.req.erp.draft", cmd) for _ in range(5)))

    assert len({r.model_dump_json() for r in replies}) == 1 and replies[0].data["outcome"] == "succeeded"
    assert await erp.drafts_of_session(session_id) == 1


async def test_edits_make_new_revisions_and_old_ones_stay_readable(erp, session_id):
    a, b = await erp.make_product(price_minor=100), await erp.make_product(price_minor=200)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(a, 1)])
    draft_id = draft["draft_id"]

    added = await erp.draft("add_draft_line", {"draft_id": draft_id, "base_revision": 1, "sku": b, "qty": 2},
                            session_id=session_id)
    updated = await erp.draft("update_draft_line", {"draft_id": draft_id, "base_revision": 2, "item_number": 1,
                                                    "expected_sku": a, "qty": 5}, session_id=session_id)
    removed = await erp.draft("remove_draft_line", {"draft_id": draft_id, "base_revision": 3, "item_number": 2,
                                                    "expected_sku": b}, session_id=session_id)

    assert [r.data["result"]["revision"] for r in (added, updated, removed)] == [2, 3, 4]
    assert added.data["result"]["total_amount_minor"] == 500
    assert updated.data["result"]["total_amount_minor"] == 900
    assert removed.data["result"]["lines"] == [{**updated.data["result"]["lines"][0]}]
    assert (await erp.view("draft", id=draft_id, revision=2)).data["total_amount_minor"] == 500
    assert (await erp.view("draft", id=draft_id)).data["revision"] == 4


async def test_an_edit_on_a_stale_base_revision_is_draft_changed(erp, session_id):
    sku = await erp.make_product()
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 1)])
    await erp.draft("set_draft_note", {"draft_id": draft["draft_id"], "base_revision": 1, "note": "a"},
                    session_id=session_id)

    reply = await erp.draft("set_draft_note", {"draft_id": draft["draft_id"], "base_revision": 1, "note": "b"},
                            session_id=session_id)

    assert reply.ok and reply.data["outcome"] == "business_rejected"
    assert reply.data["error"]["code"] == "draft_changed" and reply.data["error"]["status"] == 200
    assert await erp.revisions_of(draft["draft_id"]) == 2


async def test_two_concurrent_edits_of_one_revision_give_one_success_and_one_draft_changed(erp, session_id):
    sku = await erp.make_product()
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 1)])

    replies = await asyncio.gather(*(
        erp.draft("update_draft_line", {"draft_id": draft["draft_id"], "base_revision": 1, "item_number": 1,
                                        "expected_sku": sku, "qty": qty}, session_id=session_id)
        for qty in (2, 3)))

    outcomes = sorted(r.data["outcome"] for r in replies)
    assert outcomes == ["business_rejected", "succeeded"]
    assert next(r for r in replies if r.data["outcome"] == "business_rejected").data["error"]["code"] == \
        "draft_changed"
    assert await erp.revisions_of(draft["draft_id"]) == 2


async def test_a_business_rejection_is_stored_and_repeated_even_after_the_cause_is_gone(erp, session_id):
    sku = await erp.make_product(status="discontinued")
    cmd = erp.draft_cmd("create_order_draft", {"customer_id": await erp.make_customer(),
                                               "lines": [{"sku": sku, "qty": 1}]}, session_id=session_id)
    first = await erp.send("erpilot.v1.req.erp.draft", cmd)
    await erp.update_product(sku, status="active")

    again = await erp.send("erpilot.v1.req.erp.draft", cmd)
    # a new call (its own call id: one call runs one draft operation) now succeeds
    fresh = await erp.send("erpilot.v1.req.erp.draft", cmd.model_copy(update={"operation_id": "op-" + sku,
                                                                             "call_id": cmd.call_id + "-new"}))

    assert first.data["outcome"] == "business_rejected" and first.data["error"]["code"] == "product_unavailable"
    assert again == first
    assert fresh.data["outcome"] == "succeeded"
    assert await erp.drafts_of_session(session_id) == 1


async def test_reusing_an_operation_id_for_other_arguments_is_a_conflict(erp, session_id):
    sku = await erp.make_product()
    cmd = erp.draft_cmd("create_order_draft", {"customer_id": await erp.make_customer(),
                                               "lines": [{"sku": sku, "qty": 1}]}, session_id=session_id)
    await erp.send("erpilot.v1.req.erp.draft", cmd)

    other = cmd.model_copy(update={"arguments": {**cmd.arguments, "note": "different"}})
    reply = await erp.send("erpilot.v1.req.erp.draft", other)

    assert not reply.ok and reply.error.code == "operation_conflict" and reply.error.status == 409
    assert await erp.drafts_of_session(session_id) == 1


async def test_a_draft_in_the_inbox_from_before_the_upgrade_is_still_answered_once(erp, session_id):
    """Inbox rows stored before the versioned digest keep the bare hex of ``json.dumps``: still a repeat."""
    sku = await erp.make_product()
    cmd = erp.draft_cmd("create_order_draft", {"customer_id": await erp.make_customer(),
                                               "lines": [{"sku": sku, "qty": 1}]}, session_id=session_id)
    first = await erp.send("erpilot.v1.req.erp.draft", cmd)
    asked = {"tool": cmd.tool, "arguments": cmd.arguments, "session_id": cmd.session_id}
    pre_upgrade = hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).hexdigest()
    async with erp.engine.begin() as conn:
        rewritten = await conn.execute(text(
            "UPDATE erp.inbox SET response = jsonb_set(response::jsonb, '{request}', to_jsonb(CAST(:digest AS text)))"
            "::json WHERE message_key = :key"),
                                       {"digest": pre_upgrade, "key": f"draft:{cmd.operation_id}"})
    assert rewritten.rowcount == 1

    again = await erp.send("erpilot.v1.req.erp.draft", cmd)
    other = await erp.send("erpilot.v1.req.erp.draft",
                           cmd.model_copy(update={"arguments": {**cmd.arguments, "note": "different"}}))

    assert again == first and await erp.drafts_of_session(session_id) == 1
    assert (other.error.code, other.error.status) == ("operation_conflict", 409)


@pytest.mark.parametrize(("arguments", "code"), [
    ({"item_number": 1, "expected_sku": "SKU-OTHER", "qty": 2}, "sku_mismatch"),
    ({"item_number": 9, "expected_sku": "SKU-OTHER", "qty": 2}, "line_not_found"),
])
async def test_line_edits_check_the_line(erp, session_id, arguments, code):
    sku = await erp.make_product()
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 1)])

    reply = await erp.draft("update_draft_line", {"draft_id": draft["draft_id"], "base_revision": 1, **arguments},
                            session_id=session_id)

    assert reply.data["outcome"] == "business_rejected" and reply.data["error"]["code"] == code


async def test_a_draft_belongs_to_its_session(erp, session_id):
    sku = await erp.make_product()
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 1)])

    edit = await erp.draft("set_draft_note", {"draft_id": draft["draft_id"], "base_revision": 1, "note": "x"},
                           session_id="S-intruder")
    submit = await erp.send("erpilot.v1.cmd.erp.prepare", erp.prepare_cmd(
        "submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id="S-intruder"))

    assert edit.data["outcome"] == "business_rejected" and edit.data["error"]["code"] == "not_found"
    assert not submit.ok and submit.error.code == "not_found" and submit.error.status == 404
    assert await erp.revisions_of(draft["draft_id"]) == 1


async def test_invalid_draft_arguments_are_refused_without_effect(erp, session_id):
    reply = await erp.draft("create_order_draft", {"customer_id": "C-1001", "lines": [{"sku": "SKU-PEN-BLUE",
                                                                                      "qty": 1.5}]},
                            session_id=session_id)
    wrong_kind = await erp.draft("submit_order", {"draft_id": "D-1", "revision": 1}, session_id=session_id)

    assert not reply.ok and reply.error.code == "invalid_arguments" and reply.error.status == 422
    assert not wrong_kind.ok and wrong_kind.error.code == "not_a_draft_tool"
    assert await erp.drafts_of_session(session_id) == 0
