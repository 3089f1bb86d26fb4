"""cancel_order, refund_payment, issue_credit_note and adjust_stock through prepare and commit, with their
re-checks."""

from __future__ import annotations

import asyncio

import pytest

from erpilot_contracts import subjects

pytestmark = pytest.mark.integration


async def placed_order(erp, session_id, lines):
    draft = await erp.new_draft(session_id, await erp.make_customer(), lines)
    cmd = await erp.prepare("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)
    reply = await erp.approve_and_commit(cmd)
    assert reply.data["status"] == "committed", reply
    return reply.data["result"]


async def test_cancel_order_returns_stock_and_never_refunds(erp, session_id):
    a, b = await erp.make_product(on_hand=10), await erp.make_product(on_hand=10)
    order = await placed_order(erp, session_id, [(a, 2), (b, 3), (a, 1)])
    assert (await erp.on_hand(a), await erp.on_hand(b)) == (7, 7)
    cmd = await erp.prepare("cancel_order", {"order_id": order["order_id"], "reason": "customer called"},
                            session_id=session_id)

    reply = await erp.approve_and_commit(cmd)

    cancelled = reply.data["result"]
    assert reply.data["status"] == "committed" and cancelled["status"] == "cancelled"
    assert cancelled["paid_minor"] == order["paid_minor"] and cancelled["refunded_minor"] == 0
    assert (await erp.on_hand(a), await erp.on_hand(b)) == (10, 10)
    again = await erp.send(subjects.ERP_CMD_PREPARE, erp.prepare_cmd(
        "cancel_order", {"order_id": order["order_id"]}, session_id=session_id))
    assert not again.ok and again.error.code == "order_changed"


async def test_refunds_cannot_exceed_what_was_paid_even_when_racing(erp, session_id):
    order = await placed_order(erp, session_id, [(await erp.make_product(price_minor=1000), 3)])  # 3000 paid
    refund = {"order_id": order["order_id"], "amount_minor": 2000, "currency": "EUR", "channel": "original"}
    cmds = [await erp.prepare("refund_payment", refund, session_id=session_id) for _ in range(2)]

    replies = await asyncio.gather(*(erp.approve_and_commit(c) for c in cmds))

    assert sorted(r.data["status"] for r in replies) == ["committed", "rejected"]
    done = next(r.data["result"] for r in replies if r.data["status"] == "committed")
    assert done["refund_id"].startswith("R-") and done["remaining_minor"] == 1000
    assert next(r.data["error"]["code"] for r in replies if r.data["status"] == "rejected") == \
        "refund_exceeds_remaining"
    assert (await erp.view("order", id=order["order_id"])).data["refunded_minor"] == 2000
    too_much = await erp.send(subjects.ERP_CMD_PREPARE, erp.prepare_cmd("refund_payment", refund,
                                                                        session_id=session_id))
    assert not too_much.ok and too_much.error.code == "refund_exceeds_remaining"


async def test_credit_notes_cannot_exceed_the_total_less_refunds_even_when_racing(erp, session_id):
    order = await placed_order(erp, session_id, [(await erp.make_product(price_minor=1000), 3)])  # total 3000
    refund = {"order_id": order["order_id"], "amount_minor": 1000, "currency": "EUR", "channel": "original"}
    assert (await erp.approve_and_commit(await erp.prepare("refund_payment", refund, session_id=session_id))
            ).data["status"] == "committed"  # 2000 left to credit
    credit = {"order_id": order["order_id"], "amount_minor": 1500, "currency": "EUR", "reason": "late delivery"}
    cmds = [await erp.prepare("issue_credit_note", credit, session_id=session_id) for _ in range(3)]

    replies = await asyncio.gather(*(erp.approve_and_commit(c) for c in cmds))

    assert sorted(r.data["status"] for r in replies) == ["committed", "rejected", "rejected"]
    done = next(r.data["result"] for r in replies if r.data["status"] == "committed")
    assert done["credit_note_id"].startswith("CN-") and done["remaining_minor"] == 500
    assert {r.data["error"]["code"] for r in replies if r.data["status"] == "rejected"} == {"credit_exceeds_remaining"}
    too_much = await erp.send(subjects.ERP_CMD_PREPARE, erp.prepare_cmd("issue_credit_note", credit,
                                                                        session_id=session_id))
    assert not too_much.ok and too_much.error.code == "credit_exceeds_remaining"
    # The order shows its credit note, from the ledger's table, as the back office view and to get_order.
    view = await erp.view("order", id=order["order_id"])
    assert view.ok and view.data["credit_notes"] == [done]


async def test_adjust_stock_rejects_when_on_hand_moved_since_the_preview(erp, session_id):
    sku = await erp.make_product(on_hand=10)
    slow = await erp.prepare("adjust_stock", {"sku": sku, "delta": -4, "reason": "damaged"}, session_id=session_id)
    fast = await erp.prepare("adjust_stock", {"sku": sku, "delta": 5, "reason": "delivery"}, session_id=session_id)

    assert (await erp.approve_and_commit(fast)).data["result"]["on_hand"] == 15
    reply = await erp.approve_and_commit(slow)

    assert reply.data["status"] == "rejected" and reply.data["error"]["code"] == "stock_changed"
    assert await erp.on_hand(sku) == 15
