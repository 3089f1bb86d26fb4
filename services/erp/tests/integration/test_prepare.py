"""cmd.erp.prepare: fingerprint check, stored operation and preview, idempotency by operation_id."""

from __future__ import annotations

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import PrepareOperationV1

pytestmark = pytest.mark.integration


async def test_prepare_stores_the_operation_and_answers_its_preview(erp, session_id):
    sku = await erp.make_product(on_hand=8, price_minor=500)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 2)])
    cmd = erp.prepare_cmd("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)

    reply = await erp.send(subjects.ERP_CMD_PREPARE, cmd)

    assert reply.ok, reply
    assert (reply.data["operation_id"], reply.data["tool"], reply.data["fingerprint"]) == (
        cmd.operation_id, "submit_order", cmd.fingerprint)
    preview = reply.data["preview"]
    assert preview["operation"] == "Submit order" and preview["amount_minor"] == 1000
    assert preview["effects"] == [{"label": f"stock {sku}", "before": 8, "after": 6, "unit": "pcs"}]
    row = await erp.operation_row(cmd.operation_id)
    assert (row.status, row.fingerprint, row.arguments, row.call_id) == (
        "prepared", cmd.fingerprint, cmd.arguments, cmd.call_id)
    assert row.facts["stock_before"] == {sku: 8} and row.preview == preview
    status = (await erp.operation(cmd.operation_id)).data
    assert status["status"] == "prepared" and status["session_id"] == session_id and status["requested_by"] == "tester"


async def test_the_same_operation_again_gets_the_stored_preview_and_another_fingerprint_conflicts(erp, session_id):
    sku = await erp.make_product(on_hand=8)
    cmd = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": -3, "reason": "breakage"}, session_id=session_id)
    first = await erp.send(subjects.ERP_CMD_PREPARE, cmd)
    await erp.update_product(sku, price_minor=1)  # the preview is stored, not recomputed

    again = await erp.send(subjects.ERP_CMD_PREPARE, cmd)
    other = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": -4, "reason": "breakage"}, session_id=session_id,
                            operation_id=cmd.operation_id)
    conflict = await erp.send(subjects.ERP_CMD_PREPARE, other)

    assert first.ok and again == first
    assert first.data["preview"]["effects"] == [{"label": f"on hand {sku}", "before": 8, "after": 5, "unit": "pcs"}]
    assert not conflict.ok and conflict.error.code == "operation_conflict" and conflict.error.status == 409
    assert (await erp.operation_row(cmd.operation_id)).fingerprint == cmd.fingerprint


async def test_a_fingerprint_that_does_not_match_the_arguments_is_refused(erp, session_id):
    sku = await erp.make_product()
    cmd = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": 1, "reason": "x"}, session_id=session_id)
    forged = cmd.model_copy(update={"arguments": {**cmd.arguments, "delta": 1000}})

    reply = await erp.send(subjects.ERP_CMD_PREPARE, forged)

    assert not reply.ok and reply.error.code == "fingerprint_mismatch" and reply.error.status == 422
    assert await erp.operation_row(cmd.operation_id) is None


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    ("adjust_stock", {"sku": "SKU-PEN-BLUE", "delta": 1.0, "reason": "x"}, "invalid_arguments"),
    ("adjust_stock", {"sku": "SKU-PEN-BLUE", "delta": 1, "reason": "x", "extra": 1}, "invalid_arguments"),
    ("create_order_draft", {"customer_id": "C-1001", "lines": [{"sku": "SKU-PEN-BLUE", "qty": 1}]},
     "not_a_write_tool"),
    ("drop_tables", {}, "not_a_write_tool"),
])
async def test_bad_prepare_requests_are_refused_with_422(erp, session_id, tool, arguments, code):
    cmd = PrepareOperationV1(operation_id="op-bad-" + session_id, session_id=session_id, call_id="c", tool=tool,
                             arguments=arguments, fingerprint="sha256:x", requested_by="tester")

    reply = await erp.send(subjects.ERP_CMD_PREPARE, cmd)

    assert not reply.ok and reply.error.code == code and reply.error.status == 422
    assert await erp.operation_row(cmd.operation_id) is None


@pytest.mark.parametrize(("make", "code", "status"), [
    ("insufficient", "insufficient_stock", 409),
    ("missing", "not_found", 404),
])
async def test_a_prepare_rejection_is_stored_and_repeated(erp, session_id, make, code, status):
    sku = await erp.make_product(on_hand=2) if make == "insufficient" else "SKU-NOT-THERE-" + session_id
    cmd = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": -5, "reason": "x"}, session_id=session_id)
    first = await erp.send(subjects.ERP_CMD_PREPARE, cmd)
    if make == "insufficient":  # the cause goes away: 12 on hand now
        restock = await erp.prepare("adjust_stock", {"sku": sku, "delta": 10, "reason": "x"}, session_id=session_id)
        assert (await erp.approve_and_commit(restock)).data["status"] == "committed"

    again = await erp.send(subjects.ERP_CMD_PREPARE, cmd)

    assert not first.ok and first.error.code == code and first.error.status == status
    assert again == first
    assert await erp.operation_row(cmd.operation_id) is None
