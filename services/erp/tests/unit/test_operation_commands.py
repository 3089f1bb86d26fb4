"""PREPARE and COMMIT (``OperationService``) on the in-memory ledger: the commit re-checks price, stock
and revision against what prepare saw, a grant is used once, a repeated commit only repeats its outcome,
and a crash before the database commit leaves nothing behind."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts import subjects
from erpilot_erp.service_layer import operations

pytestmark = pytest.mark.unit


async def submit(desk, lines=(("SKU-A", 2),), **kw):
    draft = await desk.new_draft(list(lines))
    return await desk.prepared("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, **kw)


async def test_prepare_stores_the_operation_and_answers_its_preview_without_an_effect(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    cmd = desk.prepare_cmd("submit_order", {"draft_id": draft["draft_id"], "revision": 1})
    reply = await desk.operations.prepare(cmd)

    assert reply.ok and reply.data["operation_id"] == cmd.operation_id
    assert reply.data["tool"] == "submit_order"
    assert reply.data["preview"]["amount_minor"] == 2000  # 2 x SKU-A at 1000 for C-1 (no discount)
    assert "schema_version" not in reply.data["preview"]
    assert desk.state.operations[cmd.operation_id].status == "prepared"
    assert desk.state.products["SKU-A"].on_hand == 12
    assert desk.state.orders == {}


async def test_a_repeated_prepare_gets_the_first_answer_and_another_request_under_its_id_a_conflict(desk):
    cmd = await submit(desk)
    first = await desk.operations.prepare(cmd)
    other = desk.prepare_cmd("adjust_stock", {"sku": "SKU-A", "delta": 1, "reason": "found"},
                             operation_id=cmd.operation_id)

    assert await desk.operations.prepare(cmd) == first
    conflict = await desk.operations.prepare(other)
    assert not conflict.ok and conflict.error.code == "operation_conflict"
    assert desk.state.operations[cmd.operation_id].tool == "submit_order"


async def test_prepare_refuses_a_fingerprint_that_does_not_match(desk):
    cmd = desk.prepare_cmd("adjust_stock", {"sku": "SKU-A", "delta": 1, "reason": "found"})
    reply = await desk.operations.prepare(cmd.model_copy(update={"fingerprint": "sha256:" + "0" * 64}))

    assert not reply.ok and (reply.error.code, reply.error.status) == ("fingerprint_mismatch", 422)
    assert desk.state.operations == {}


async def test_commit_applies_the_effect_consumes_the_grant_and_writes_the_event(desk):
    cmd = await submit(desk)
    grant = desk.grant(cmd, pending_id="pa-1")
    reply = await desk.commit(cmd, grant)

    assert reply.ok and reply.data["status"] == "committed"
    order_id = reply.data["result"]["order_id"]
    assert desk.state.orders[order_id].draft_id == "D-1"
    assert desk.state.products["SKU-A"].on_hand == 10
    assert desk.state.drafts["D-1"].status == "submitted"
    assert desk.state.consumed_grants == {"pa-1": cmd.operation_id}
    [(subject, payload, msg_id)] = desk.state.outbox
    assert subject == subjects.ERP_EVT_OPERATION_FINISHED
    assert msg_id == f"erp.operation_finished.{cmd.operation_id}"
    assert payload["status"] == "committed"
    assert desk.ledger.wakes == 1


async def test_a_repeated_commit_answers_the_recorded_outcome_without_a_second_effect(desk):
    cmd = await submit(desk)
    grant = desk.grant(cmd)
    first = await desk.commit(cmd, grant)
    again = await desk.commit(cmd, grant)

    assert again == first
    assert desk.state.products["SKU-A"].on_hand == 10
    assert len(desk.state.orders) == 1
    assert len(desk.state.outbox) == 1


@pytest.mark.parametrize(("change", "code"), [
    ({"price_minor": 1100}, "quote_changed"),
    ({"on_hand": 11}, "stock_changed"),
])
async def test_commit_rejects_a_submit_whose_price_or_stock_moved_since_prepare(desk, change, code):
    cmd = await submit(desk)
    desk.state.products["SKU-A"] = replace(desk.state.products["SKU-A"], **change)
    reply = await desk.commit(cmd)

    assert reply.ok and reply.data["status"] == "rejected"
    assert reply.data["error"]["code"] == code
    assert desk.state.orders == {}
    assert desk.state.drafts["D-1"].status == "open"
    assert desk.state.outbox[0][1]["status"] == "rejected"


async def test_sufficient_stock_check_commits_when_stock_moved_but_still_covers_the_lines(desk):
    cmd = await submit(desk)
    desk.state.products["SKU-A"] = replace(desk.state.products["SKU-A"], on_hand=5)
    reply = await desk.commit(cmd, desk.grant(cmd, stock_check="sufficient"))

    assert reply.data["status"] == "committed"
    assert desk.state.products["SKU-A"].on_hand == 3


async def test_commit_rejects_a_submit_whose_draft_got_a_new_revision_since_prepare(desk):
    cmd = await submit(desk)
    await desk.drafts.handle(desk.draft_cmd("set_draft_note", {"draft_id": "D-1", "base_revision": 1, "note": "x"}))
    reply = await desk.commit(cmd)

    assert reply.data["status"] == "rejected"
    assert reply.data["error"]["code"] == "draft_changed"
    assert desk.state.orders == {}


async def test_a_grant_that_does_not_verify_or_names_another_operation_changes_nothing(desk):
    cmd = await submit(desk)
    forged = desk.grant(cmd, key=Ed25519PrivateKey.generate())
    elsewhere = desk.grant(cmd, operation_id="op-other")

    for grant in (forged, elsewhere):
        reply = await desk.commit(cmd, grant)
        assert not reply.ok and (reply.error.code, reply.error.status) == ("invalid_grant", 403)
    assert desk.state.operations[cmd.operation_id].status == "prepared"
    assert desk.state.consumed_grants == {}


async def test_a_grant_is_used_once_even_across_operations(desk):
    first = await desk.prepared("adjust_stock", {"sku": "SKU-A", "delta": 1, "reason": "found"})
    second = await desk.prepared("adjust_stock", {"sku": "SKU-A", "delta": 1, "reason": "found again"})
    await desk.commit(first, desk.grant(first, pending_id="pa-1"))
    reply = await desk.commit(second, desk.grant(second, pending_id="pa-1"))

    assert not reply.ok and reply.error.code == "invalid_grant"
    assert desk.state.operations[second.operation_id].status == "prepared"
    assert desk.state.products["SKU-A"].on_hand == 13


async def test_commit_of_an_unprepared_operation_or_with_another_fingerprint_is_refused(desk):
    cmd = await submit(desk)
    unknown = desk.prepare_cmd("adjust_stock", {"sku": "SKU-A", "delta": 1, "reason": "found"})
    assert (await desk.commit(unknown)).error.code == "not_found"

    other = desk.prepare_cmd("adjust_stock", {"sku": "SKU-A", "delta": 2, "reason": "found"},
                             operation_id=cmd.operation_id)
    reply = await desk.commit(cmd, desk.grant(other))
    assert (reply.error.code, reply.error.status) == ("operation_conflict", 409)


async def test_a_crash_before_the_database_commit_leaves_nothing_and_the_redelivery_commits(desk, monkeypatch):
    cmd = await submit(desk)
    grant = desk.grant(cmd)

    def crash(name):
        if name == "erp.commit.before_db_commit":
            raise SystemExit(137)

    monkeypatch.setattr(operations, "failpoint", crash)
    with pytest.raises(SystemExit):
        await desk.commit(cmd, grant)
    assert desk.state.operations[cmd.operation_id].status == "prepared"
    assert desk.state.consumed_grants == {} and desk.state.outbox == []
    assert desk.state.products["SKU-A"].on_hand == 12

    monkeypatch.undo()
    reply = await desk.commit(cmd, grant)
    assert reply.data["status"] == "committed"
    assert desk.state.products["SKU-A"].on_hand == 10
