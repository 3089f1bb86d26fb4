"""No write effect without a valid, unconsumed grant for that exact operation and fingerprint (SPEC §8)."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

pytestmark = pytest.mark.integration


@pytest.fixture
async def prepared(erp, session_id):
    """An adjust_stock of +7 on a fresh product (on hand 10), prepared and waiting for its grant."""
    sku = await erp.make_product(on_hand=10)
    cmd = await erp.prepare("adjust_stock", {"sku": sku, "delta": 7, "reason": "recount"}, session_id=session_id)
    return sku, cmd


async def assert_nothing_committed(erp, sku, cmd):
    assert await erp.on_hand(sku) == 10
    row = await erp.operation_row(cmd.operation_id)
    assert row.status == "prepared" and row.grant_pending_id is None and row.result is None
    assert (await erp.operation(cmd.operation_id)).data["status"] == "prepared"


def forged(grant):
    raw = bytearray(base64.b64decode(grant.signature))
    raw[0] ^= 0xFF
    return grant.model_copy(update={"signature": base64.b64encode(bytes(raw)).decode()})


@pytest.mark.parametrize("make_grant", [
    pytest.param(lambda erp, cmd: forged(erp.grant(cmd.operation_id, cmd.fingerprint)), id="forged-signature"),
    pytest.param(lambda erp, cmd: erp.grant(cmd.operation_id, cmd.fingerprint).model_copy(
        update={"decided_by": "mallory"}), id="altered-after-signing"),
    pytest.param(lambda erp, cmd: erp.grant(cmd.operation_id, cmd.fingerprint).model_copy(
        update={"signature": ""}), id="unsigned"),
    pytest.param(lambda erp, cmd: erp.grant(cmd.operation_id, cmd.fingerprint, key=Ed25519PrivateKey.generate()),
                 id="wrong-key"),
    pytest.param(lambda erp, cmd: erp.grant("op-someone-else", cmd.fingerprint), id="another-operation"),
])
async def test_an_invalid_grant_commits_nothing_and_a_valid_one_still_can(erp, prepared, make_grant):
    sku, cmd = prepared

    reply = await erp.commit(cmd.operation_id, make_grant(erp, cmd))

    assert not reply.ok and reply.error.code == "invalid_grant" and reply.error.status == 403
    await assert_nothing_committed(erp, sku, cmd)
    later = await erp.approve_and_commit(cmd)
    assert later.data["status"] == "committed" and await erp.on_hand(sku) == 17


async def test_a_grant_for_another_fingerprint_is_an_operation_conflict(erp, prepared):
    sku, cmd = prepared
    other = "sha256:" + "0" * 64

    reply = await erp.commit(cmd.operation_id, erp.grant(cmd.operation_id, other))

    assert not reply.ok and reply.error.code == "operation_conflict" and reply.error.status == 409
    await assert_nothing_committed(erp, sku, cmd)


async def test_a_consumed_grant_cannot_commit_another_operation(erp, prepared, session_id):
    sku, first = prepared
    used = erp.grant(first.operation_id, first.fingerprint)
    assert (await erp.commit(first.operation_id, used)).data["status"] == "committed"
    other_sku = await erp.make_product(on_hand=10)
    second = await erp.prepare("adjust_stock", {"sku": other_sku, "delta": 7, "reason": "recount"},
                               session_id=session_id)

    # A validly signed grant reusing the consumed pending_id for another operation.
    reply = await erp.commit(second.operation_id,
                             erp.grant(second.operation_id, second.fingerprint, pending_id=used.pending_id))

    assert not reply.ok and reply.error.code == "invalid_grant"
    await assert_nothing_committed(erp, other_sku, second)
    assert await erp.on_hand(sku) == 17


async def test_the_same_grant_again_returns_the_recorded_result(erp, prepared):
    sku, cmd = prepared
    grant = erp.grant(cmd.operation_id, cmd.fingerprint)

    first = await erp.commit(cmd.operation_id, grant)
    second = await erp.commit(cmd.operation_id, grant)

    assert first.data["status"] == "committed" and first == second
    assert first.data["result"] == {"sku": sku, "name": f"Test item {sku}", "status": "active", "price_minor": 1000,
                                    "currency": "EUR", "on_hand": 17}
    assert await erp.on_hand(sku) == 17


async def test_a_commit_of_an_unknown_operation_is_not_found(erp):
    reply = await erp.commit("op-never-prepared", erp.grant("op-never-prepared", "sha256:" + "1" * 64))

    assert not reply.ok and reply.error.code == "not_found" and reply.error.status == 404
