"""Every ERP command delivered twice (the same message published again): identical answers, one effect."""

from __future__ import annotations

import asyncio
import json

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import CommitOperationV1, UpdateProductV1

pytestmark = pytest.mark.integration


async def twice(erp, subject, cmd):
    """Once, then twice more at the same time (a redelivery racing a retry)."""
    first = await erp.send(subject, cmd)
    rest = await asyncio.gather(erp.send(subject, cmd), erp.send(subject, cmd))
    assert all(r == first for r in rest), (first, rest)
    return first


async def test_create_order_draft_twice(erp, session_id):
    cmd = erp.draft_cmd("create_order_draft", {"customer_id": await erp.make_customer(),
                                               "lines": [{"sku": await erp.make_product(), "qty": 2}]},
                        session_id=session_id)
    reply = await twice(erp, subjects.ERP_REQ_DRAFT, cmd)
    assert reply.data["outcome"] == "succeeded" and await erp.drafts_of_session(session_id) == 1


@pytest.mark.parametrize("tool", ["update_draft_line", "add_draft_line", "remove_draft_line", "set_draft_note"])
async def test_draft_edits_twice(erp, session_id, tool):
    a, b = await erp.make_product(), await erp.make_product()
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(a, 1), (b, 1)])
    base = {"draft_id": draft["draft_id"], "base_revision": 1}
    arguments = {
        "update_draft_line": {**base, "item_number": 1, "expected_sku": a, "qty": 4},
        "add_draft_line": {**base, "sku": b, "qty": 2},
        "remove_draft_line": {**base, "item_number": 2, "expected_sku": b},
        "set_draft_note": {**base, "note": "twice"},
    }[tool]
    reply = await twice(erp, subjects.ERP_REQ_DRAFT, erp.draft_cmd(tool, arguments, session_id=session_id))
    assert reply.data["outcome"] == "succeeded" and reply.data["result"]["revision"] == 2
    assert await erp.revisions_of(draft["draft_id"]) == 2


async def test_prepare_twice(erp, session_id):
    cmd = erp.prepare_cmd("adjust_stock", {"sku": await erp.make_product(), "delta": 2, "reason": "x"},
                          session_id=session_id)
    reply = await twice(erp, subjects.ERP_CMD_PREPARE, cmd)
    assert reply.ok and (await erp.operation_row(cmd.operation_id)).status == "prepared"


async def test_commit_twice(erp, session_id):
    sku = await erp.make_product(on_hand=10)
    prepared = await erp.prepare("adjust_stock", {"sku": sku, "delta": -3, "reason": "x"}, session_id=session_id)
    cmd = CommitOperationV1(operation_id=prepared.operation_id,
                            grant=erp.grant(prepared.operation_id, prepared.fingerprint))
    reply = await twice(erp, subjects.ERP_CMD_COMMIT, cmd)
    assert reply.data["status"] == "committed" and await erp.on_hand(sku) == 7


async def test_update_product_twice_is_answered_from_its_request_id(erp):
    sku = await erp.make_product(price_minor=500)
    cmd = UpdateProductV1(sku=sku, price_minor=700, updated_by="admin", request_id="rq-" + sku)
    reply = await twice(erp, subjects.ERP_CMD_UPDATE_PRODUCT, cmd)
    later = await erp.update_product(sku, price_minor=800, request_id="rq2-" + sku)

    late_redelivery = await erp.send(subjects.ERP_CMD_UPDATE_PRODUCT, cmd)

    assert reply.data["price_minor"] == 700 and later.data["price_minor"] == 800
    assert late_redelivery == reply
    assert (await erp.view("product", id=sku)).data["price_minor"] == 800  # the old change is not re-applied


async def test_a_product_change_without_its_request_id_is_refused_and_changes_nothing(erp):
    """Its idempotency key must be fixed before the first publish: without one a redelivery could not be told
    from a new change, so the ERP does not apply it at all."""
    sku = await erp.make_product(price_minor=500)
    body = json.dumps({"sku": sku, "price_minor": 900, "updated_by": "admin"}).encode()

    reply = await erp.send_raw(subjects.ERP_CMD_UPDATE_PRODUCT, body)

    assert not reply.ok and reply.error.code == "invalid_message"
    assert (await erp.view("product", id=sku)).data["price_minor"] == 500
