"""No write effect without a valid, unconsumed grant for that exact operation and fingerprint (SPEC §8).

A commit the ERP cannot honour is a message that may not be acted on (``invalid_message``, ``details.reason``
naming the rule, dead-lettered): nothing changes and nothing is published, so it cannot end anyone's call."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts import subjects
from erpilot_contracts.subjects import DEAD_LETTER_STREAM, dead_letter_subject

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


def refused(reply, reason: str) -> bool:
    return (not reply.ok and (reply.error.code, reply.error.status) == ("invalid_message", 422)
            and reply.error.details["reason"] == reason)


async def dead_lettered_last(erp, operation_id: str) -> bool:
    js = erp.broker.config.connection_state.stream
    last = await js.get_last_msg(DEAD_LETTER_STREAM.name, dead_letter_subject("erp", subjects.ERP_CMD_COMMIT))
    return json.loads(last.data)["operation_id"] == operation_id


@pytest.mark.parametrize(("make_grant", "reason"), [
    pytest.param(lambda erp, cmd: forged(erp.grant(cmd.operation_id, cmd.fingerprint)), "invalid_grant",
                 id="forged-signature"),
    pytest.param(lambda erp, cmd: erp.grant(cmd.operation_id, cmd.fingerprint).model_copy(
        update={"decided_by": "mallory"}), "invalid_grant", id="altered-after-signing"),
    pytest.param(lambda erp, cmd: erp.grant(cmd.operation_id, cmd.fingerprint).model_copy(
        update={"signature": ""}), "invalid_grant", id="unsigned"),
    pytest.param(lambda erp, cmd: erp.grant(cmd.operation_id, cmd.fingerprint, key=Ed25519PrivateKey.generate()),
                 "invalid_grant", id="wrong-key"),
    pytest.param(lambda erp, cmd: erp.grant("op-someone-else", cmd.fingerprint), "grant_for_another_operation",
                 id="another-operation"),
])
async def test_an_invalid_grant_commits_nothing_and_a_valid_one_still_can(erp, prepared, make_grant, reason):
    sku, cmd = prepared

    reply = await erp.commit(cmd.operation_id, make_grant(erp, cmd))

    assert refused(reply, reason), reply
    assert await dead_lettered_last(erp, cmd.operation_id)
    await assert_nothing_committed(erp, sku, cmd)
    later = await erp.approve_and_commit(cmd)
    assert later.data["status"] == "committed" and await erp.on_hand(sku) == 17


async def test_a_grant_for_another_fingerprint_is_an_operation_conflict(erp, prepared):
    sku, cmd = prepared
    other = "sha256:" + "0" * 64

    reply = await erp.commit(cmd.operation_id, erp.grant(cmd.operation_id, other))

    assert refused(reply, "operation_conflict"), reply
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

    assert refused(reply, "grant_already_used"), reply
    await assert_nothing_committed(erp, other_sku, second)
    assert await erp.on_hand(sku) == 17


async def test_the_same_grant_again_returns_the_recorded_result(erp, prepared):
    sku, cmd = prepared
    grant = erp.grant(cmd.operation_id, cmd.fingerprint)

    first = await erp.commit(cmd.operation_id, grant)
    second = await erp.commit(cmd.operation_id, grant)

    assert first.data["status"] == "committed" and first == second
    assert (first.data["pending_id"], first.data["decided_by"]) == (grant.pending_id, "approver-1")
    assert first.data["result"] == {"sku": sku, "name": f"Test item {sku}", "status": "active", "price_minor": 1000,
                                    "currency": "EUR", "on_hand": 17}
    assert await erp.on_hand(sku) == 17


async def test_a_commit_of_an_operation_never_prepared_is_refused(erp):
    reply = await erp.commit("op-never-prepared", erp.grant("op-never-prepared", "sha256:" + "1" * 64))

    assert refused(reply, "never_prepared"), reply
