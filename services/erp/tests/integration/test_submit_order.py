"""submit_order end to end over NATS: prepare, commit under a grant, exactly one effect, recorded answers."""

from __future__ import annotations

import asyncio
import json

import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy

from erpilot_contracts import subjects

pytestmark = pytest.mark.integration


async def test_submit_order_commits_once_and_records_the_result(erp, session_id):
    sku = await erp.make_product(on_hand=20, price_minor=1250)
    customer = await erp.make_customer(discount_pct=10)
    draft = await erp.new_draft(session_id, customer, [(sku, 3)])
    cmd = await erp.prepare("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)

    reply = await erp.approve_and_commit(cmd)

    assert reply.ok, reply
    status = reply.data
    assert status["status"] == "committed" and status["session_id"] == session_id
    order = status["result"]
    assert order["order_id"].startswith("O-") and order["status"] == "placed"
    assert order["total_amount_minor"] == order["paid_minor"] == 3375 and order["refunded_minor"] == 0
    assert order["lines"] == [{"sku": sku, "name": f"Test item {sku}", "qty": 3, "unit_price_minor": 1250,
                               "line_total_minor": 3375}]
    assert await erp.on_hand(sku) == 17
    assert (await erp.view("draft", id=draft["draft_id"])).data["status"] == "submitted"
    # The view is the result plus the session the order came from (for the gateway's "who may read it") and its
    # credit notes (none yet).
    assert (await erp.view("order", id=order["order_id"])).data == {**order, "session_id": session_id,
                                                                   "owner": "tester", "credit_notes": []}
    recorded = await erp.operation(cmd.operation_id)
    assert recorded.data == status and recorded.data["requested_by"] == "tester"


async def test_eight_concurrent_commits_of_one_operation_have_one_effect_and_one_answer(erp, session_id):
    sku = await erp.make_product(on_hand=50)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 4)])
    cmd = await erp.prepare("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)
    grant = erp.grant(cmd.operation_id, cmd.fingerprint)

    replies = await asyncio.gather(*(erp.commit(cmd.operation_id, grant) for _ in range(8)))

    assert all(r.ok for r in replies), replies
    assert len({r.model_dump_json() for r in replies}) == 1
    assert replies[0].data["status"] == "committed"
    assert await erp.on_hand(sku) == 46
    assert await erp.orders_of_draft(draft["draft_id"]) == 1


@pytest.mark.parametrize(("stock_check", "first_qty", "second_qty", "loser_code"), [
    ("exact", 5, 3, "stock_changed"),
    ("sufficient", 4, 4, "stock_changed"),
    (None, 5, 5, "stock_changed"),
])
async def test_two_orders_racing_for_the_last_units_one_wins_and_stock_never_goes_negative(
        erp, session_id, stock_check, first_qty, second_qty, loser_code):
    sku = await erp.make_product(on_hand=5)
    customer = await erp.make_customer()
    drafts = [await erp.new_draft(session_id, customer, [(sku, qty)]) for qty in (first_qty, second_qty)]
    cmds = [await erp.prepare("submit_order", {"draft_id": d["draft_id"], "revision": 1}, session_id=session_id,
                              stock_check=stock_check) for d in drafts]

    replies = await asyncio.gather(*(erp.approve_and_commit(c, stock_check=stock_check) for c in cmds))

    statuses = sorted(r.data["status"] for r in replies)
    assert statuses == ["committed", "rejected"], replies
    winner = next(r.data for r in replies if r.data["status"] == "committed")
    loser = next(r.data for r in replies if r.data["status"] == "rejected")
    assert loser["error"]["code"] == loser_code and loser["result"] is None
    assert await erp.on_hand(sku) == 5 - winner["result"]["lines"][0]["qty"] >= 0
    assert sum([await erp.orders_of_draft(d["draft_id"]) for d in drafts]) == 1


async def test_a_price_change_between_prepare_and_commit_rejects_with_quote_changed(erp, session_id):
    sku = await erp.make_product(on_hand=10, price_minor=1000)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 2)])
    cmd = await erp.prepare("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)

    changed = await erp.update_product(sku, price_minor=1100)
    grant = erp.grant(cmd.operation_id, cmd.fingerprint)
    reply = await erp.commit(cmd.operation_id, grant)
    again = await erp.commit(cmd.operation_id, grant)

    assert changed.ok and changed.data["price_minor"] == 1100
    assert reply.ok and reply.data["status"] == "rejected"
    assert reply.data["error"]["code"] == "quote_changed" and "10.00 EUR is now 11.00 EUR" in reply.data["error"][
        "message"]
    assert again == reply and (await erp.operation(cmd.operation_id)).data == reply.data
    assert await erp.on_hand(sku) == 10 and await erp.orders_of_draft(draft["draft_id"]) == 0
    assert (await erp.operation_row(cmd.operation_id)).grant_pending_id == grant.pending_id


async def test_a_discontinued_product_rejects_the_commit_and_an_edit_re_quotes(erp, session_id):
    sku = await erp.make_product(on_hand=10)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 2)])
    cmd = await erp.prepare("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)
    await erp.update_product(sku, status="discontinued")

    reply = await erp.approve_and_commit(cmd)

    assert reply.data["status"] == "rejected" and reply.data["error"]["code"] == "quote_changed"


async def test_an_edit_after_prepare_rejects_the_commit_with_draft_changed(erp, session_id):
    sku = await erp.make_product(on_hand=10)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 2)])
    cmd = await erp.prepare("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)
    edit = await erp.draft("set_draft_note", {"draft_id": draft["draft_id"], "base_revision": 1, "note": "later"},
                           session_id=session_id)

    reply = await erp.approve_and_commit(cmd)

    assert edit.data["outcome"] == "succeeded"
    assert reply.data["status"] == "rejected" and reply.data["error"]["code"] == "draft_changed"
    assert await erp.on_hand(sku) == 10


async def test_commit_publishes_operation_finished_from_the_outbox(erp, session_id):
    js = erp.broker.config.connection_state.stream
    events = await js.pull_subscribe(subjects.ERP_EVT_OPERATION_FINISHED, stream="ERPILOT_EVENTS",
                                     config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW))
    sku = await erp.make_product(on_hand=10)
    cmd = await erp.prepare("adjust_stock", {"sku": sku, "delta": 5, "reason": "count"}, session_id=session_id)

    reply = await erp.approve_and_commit(cmd)

    seen = []
    for _ in range(20):
        for msg in await events.fetch(10, timeout=5):
            await msg.ack()
            seen.append(msg)
        mine = [m for m in seen if cmd.operation_id in m.data.decode()]
        if mine:
            break
    assert len(mine) == 1
    assert json.loads(mine[0].data) == reply.data
    assert mine[0].headers["Nats-Msg-Id"].startswith(f"erp.operation_finished.{cmd.operation_id}.")
    await events.unsubscribe()
