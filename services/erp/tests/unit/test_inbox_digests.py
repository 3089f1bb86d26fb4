"""What the inbox stores to recognise a redelivery: the versioned canonical digest, and inbox rows
written before it (an unversioned sha256 of ``json.dumps``) still recognised after the upgrade."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable
from typing import Any

import pytest

from erpilot_contracts.erp.v1 import UpdateProductV1
from erpilot_platform.idempotency import request_digest
from erpilot_platform.refusals import Refused

pytestmark = pytest.mark.unit

CREATE = {"customer_id": "C-1", "lines": [{"sku": "SKU-A", "qty": 2}]}
STOCK = {"sku": "SKU-A", "delta": -1, "reason": "damaged"}


def pre_upgrade_print(**request: Any) -> str:
    """The digest the ERP stored in the inbox before ``erpilot_platform.idempotency`` (written out here)."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()


def stored_before_the_upgrade(desk, key: str, digest: str) -> None:
    desk.ledger.inbox[key] = desk.ledger.inbox[key] | {"request": digest}


async def refusal(answer: Awaitable[Any]) -> Refused:
    with pytest.raises(Refused) as refused:
        await answer
    return refused.value


def assert_conflict(refused: Refused) -> None:
    assert (refused.code, refused.status) == ("operation_conflict", 409)


def product_change(request_id: str, **changes: Any) -> UpdateProductV1:
    return UpdateProductV1(sku="SKU-A", updated_by="admin", request_id=request_id, **changes)


async def test_the_inbox_stores_the_versioned_canonical_digest(desk):
    cmd = desk.draft_cmd("create_order_draft", CREATE, operation_id="op-1")
    await desk.drafts.handle(cmd)

    assert desk.ledger.inbox["draft:op-1"]["request"] == request_digest(
        {"tool": cmd.tool, "arguments": CREATE, "session_id": cmd.session_id})


async def test_a_draft_stored_before_the_upgrade_and_redelivered_after_it_gets_its_first_answer(desk):
    cmd = desk.draft_cmd("create_order_draft", CREATE, operation_id="op-1")
    first = await desk.drafts.handle(cmd)
    stored_before_the_upgrade(desk, "draft:op-1", pre_upgrade_print(
        tool=cmd.tool, arguments=CREATE, session_id=cmd.session_id))

    assert await desk.drafts.handle(cmd) == first
    assert list(desk.state.drafts) == ["D-1"]
    other = desk.draft_cmd("create_order_draft", CREATE | {"lines": [{"sku": "SKU-B", "qty": 1}]},
                           operation_id="op-1")
    assert_conflict(await refusal(desk.drafts.handle(other)))


async def test_a_prepare_stored_before_the_upgrade_and_redelivered_after_it_gets_its_first_answer(desk):
    cmd = desk.prepare_cmd("adjust_stock", STOCK, operation_id="op-2")
    first = await desk.operations.prepare(cmd)
    stored_before_the_upgrade(desk, "prepare:op-2", pre_upgrade_print(
        fingerprint=cmd.fingerprint, session_id=cmd.session_id, call_id=cmd.call_id))

    assert await desk.operations.prepare(cmd) == first
    assert_conflict(await refusal(desk.operations.prepare(cmd.model_copy(update={"call_id": "another-call"}))))


@pytest.mark.parametrize("changes", [{"price_minor": 1200}, {"status": "discontinued"},
                                     {"price_minor": 0, "status": "active"}])
async def test_a_product_change_stored_before_the_upgrade_and_redelivered_after_it_gets_its_first_answer(
        desk, changes):
    cmd = product_change("req-1", **changes)
    first = await desk.products.update(cmd)
    stored_before_the_upgrade(desk, "product:req-1", pre_upgrade_print(
        sku=cmd.sku, price_minor=cmd.price_minor, status=cmd.status))

    assert await desk.products.update(cmd) == first
    assert_conflict(await refusal(desk.products.update(product_change("req-1", price_minor=1))))


async def test_a_price_beyond_rfc_8785_integers_is_answered_once_like_any_other(desk):
    huge = 2**60  # the schema allows it (the column is a bigint); RFC 8785 integers end at 2**53 - 1
    first = await desk.products.update(product_change("req-1", price_minor=huge))

    assert first.price_minor == huge
    assert await desk.products.update(product_change("req-1", price_minor=huge)) == first
    assert_conflict(await refusal(desk.products.update(product_change("req-1", price_minor=huge + 1))))
