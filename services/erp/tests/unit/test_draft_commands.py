"""The draft tools (``DraftService``) on the in-memory ledger: one revision per call, exactly once per
``operation_id``, a business rejection answered (and remembered) as ``business_rejected``, and only for the
requester the gateway vouched for in that session."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import UpdateProductV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_platform.refusals import InvalidMessage, Refused

pytestmark = pytest.mark.unit

CREATE = {"customer_id": "C-1", "lines": [{"sku": "SKU-A", "qty": 2}]}


async def test_create_makes_revision_one_of_a_new_draft(desk):
    result = await desk.drafts.handle(desk.draft_cmd("create_order_draft", CREATE))

    assert result.outcome == "succeeded"
    assert result.result["draft_id"] == "D-1"
    assert result.result["revision"] == 1
    assert desk.state.drafts["D-1"].session_id == "S-1"
    assert list(desk.state.drafts["D-1"].revisions) == [1]


async def test_a_redelivered_create_gets_the_first_answer_and_makes_no_second_draft(desk):
    cmd = desk.draft_cmd("create_order_draft", CREATE, operation_id="op-create")
    first = await desk.drafts.handle(cmd)
    again = await desk.drafts.handle(cmd)

    assert again == first
    assert list(desk.state.drafts) == ["D-1"]
    assert desk.ledger.inbox["draft:op-create"]["reply"] == ReplyV1.success(first).model_dump(mode="json")


async def test_an_operation_id_reused_for_other_arguments_is_a_conflict(desk):
    await desk.drafts.handle(desk.draft_cmd("create_order_draft", CREATE, operation_id="op-x"))
    other = CREATE | {"lines": [{"sku": "SKU-B", "qty": 1}]}
    with pytest.raises(Refused) as refused:
        await desk.drafts.handle(desk.draft_cmd("create_order_draft", other, operation_id="op-x"))

    assert (refused.value.code, refused.value.status) == ("operation_conflict", 409)
    assert list(desk.state.drafts) == ["D-1"]


async def test_one_calls_assertion_makes_one_draft_not_more_under_new_operation_ids(desk):
    """Security review of #32: the agent repeats a direct call's draft command with the same call id and assertion
    and new operation ids; only the first makes a draft."""
    cmd = desk.draft_cmd("create_order_draft", CREATE)
    one = desk.assertion(call_id=cmd.call_id, tool=cmd.tool, ttl=timedelta(seconds=60))
    first = await desk.drafts.handle(cmd.model_copy(update={"assertion": one}))

    for n, qty in enumerate((5, 9)):
        more = cmd.model_copy(update={"assertion": one, "operation_id": f"op-more-{n}",
                                      "arguments": {**CREATE, "lines": [{"sku": "SKU-A", "qty": qty}]}})
        with pytest.raises(InvalidMessage) as refused:
            await desk.drafts.handle(more)
        assert refused.value.reason == "call_already_prepared"

    assert list(desk.state.drafts) == ["D-1"]
    assert await desk.drafts.handle(cmd.model_copy(update={"assertion": one})) == first  # its retry is answered


async def test_a_direct_calls_assertion_makes_a_draft_only_with_the_arguments_the_person_gave(desk):
    cmd = desk.draft_cmd("create_order_draft", CREATE)
    asked = fingerprint(cmd.tool, 1, normalise(cmd.tool, CREATE))
    one = desk.assertion(call_id=cmd.call_id, tool=cmd.tool, args=asked, ttl=timedelta(seconds=60))
    other = cmd.model_copy(update={"assertion": one, "arguments": {**CREATE, "lines": [{"sku": "SKU-A", "qty": 9}]}})
    with pytest.raises(InvalidMessage) as refused:
        await desk.drafts.handle(other)
    assert refused.value.reason == "assertion_args_mismatch" and desk.state.drafts == {}

    assert (await desk.drafts.handle(cmd.model_copy(update={"assertion": one}))).outcome == "succeeded"


async def test_an_edit_on_the_latest_revision_makes_the_next_one(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    result = await desk.drafts.handle(desk.draft_cmd(
        "set_draft_note", {"draft_id": draft["draft_id"], "base_revision": 1, "note": "ring twice"}))

    assert result.outcome == "succeeded"
    assert result.result["revision"] == 2
    assert result.result["note"] == "ring twice"
    assert sorted(desk.state.drafts[draft["draft_id"]].revisions) == [1, 2]


async def test_an_edit_on_an_older_revision_is_rejected_and_the_rejection_is_remembered(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    note = {"draft_id": draft["draft_id"], "base_revision": 1}
    await desk.drafts.handle(desk.draft_cmd("set_draft_note", note | {"note": "first"}))
    stale = desk.draft_cmd("set_draft_note", note | {"note": "second"})

    result = await desk.drafts.handle(stale)
    assert result.outcome == "business_rejected"
    assert result.error.code == "draft_changed"
    assert sorted(desk.state.drafts[draft["draft_id"]].revisions) == [1, 2]
    assert await desk.drafts.handle(stale) == result


async def test_a_draft_for_an_unknown_customer_is_rejected_without_a_draft(desk):
    result = await desk.drafts.handle(desk.draft_cmd("create_order_draft", CREATE | {"customer_id": "C-404"}))

    assert result.outcome == "business_rejected"
    assert result.error.code == "not_found"
    assert desk.state.drafts == {}


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    ("submit_order", {"draft_id": "D-1", "revision": 1}, "not_a_draft_tool"),
    ("create_order_draft", {"customer_id": "C-1", "lines": []}, "invalid_arguments"),
])
async def test_what_is_not_a_valid_draft_call_is_refused_before_the_ledger(desk, tool, arguments, code):
    with pytest.raises(Refused) as refused:
        await desk.drafts.handle(desk.draft_cmd(tool, arguments))

    assert (refused.value.code, refused.value.status) == (code, 422)
    assert desk.ledger.inbox == {}


def other_key_assertion(desk, **kw):
    return desk.assertion(key=Ed25519PrivateKey.generate(), **kw)


@pytest.mark.parametrize(("assertion", "reason"), [
    (lambda desk: None, "assertion_missing"),
    (lambda desk: "not.a.jws", "assertion_invalid"),
    (other_key_assertion, "assertion_invalid"),
    (lambda desk: desk.assertion(session_id="S-other"), "assertion_session_mismatch"),
    (lambda desk: desk.assertion(sub="mallory"), "assertion_subject_mismatch"),
    (lambda desk: desk.assertion(issued=desk.ledger.clock() - timedelta(hours=2)), "assertion_expired"),
    # the assertion of another call (a read, say) of the same person in the same session (issue #32)
    (lambda desk: desk.assertion(call_id="call-a-read", tool="search_products"), "assertion_call_mismatch"),
])
async def test_a_draft_without_a_valid_assertion_for_its_requester_and_session_stores_nothing(
        desk, assertion, reason):
    cmd = desk.draft_cmd("create_order_draft", CREATE, assertion=assertion(desk))
    with pytest.raises(InvalidMessage) as refused:
        await desk.drafts.handle(cmd)

    assert refused.value.reason == reason and refused.value.code == "invalid_message"
    assert desk.state.drafts == {} and desk.ledger.inbox == {}  # not even the answer: a valid redelivery may come
    valid = await desk.drafts.handle(cmd.model_copy(update={"assertion": desk.assertion()}))
    assert valid.outcome == "succeeded"


async def test_a_redelivery_after_the_assertion_expired_still_gets_its_first_answer(desk):
    cmd = desk.draft_cmd("create_order_draft", CREATE)
    first = await desk.drafts.handle(cmd)
    desk.ledger.advance(timedelta(hours=2))

    assert await desk.drafts.handle(cmd) == first
    with pytest.raises(InvalidMessage, match="expired"):  # a new draft with that assertion is refused
        await desk.drafts.handle(desk.draft_cmd("create_order_draft", CREATE, assertion=cmd.assertion))


async def test_a_product_change_is_applied_once_per_request_id(desk):
    change = UpdateProductV1(sku="SKU-A", price_minor=1200, updated_by="admin", request_id="rq-1")
    first = await desk.products.update(change)
    again = await desk.products.update(change)
    with pytest.raises(Refused) as reused:
        await desk.products.update(change.model_copy(update={"price_minor": 1300}))

    assert first.price_minor == 1200
    assert again == first
    assert reused.value.code == "operation_conflict"
    assert desk.state.products["SKU-A"].price_minor == 1200


async def test_a_change_of_an_unknown_product_is_refused_and_the_refusal_remembered(desk):
    change = UpdateProductV1(sku="SKU-NONE", price_minor=1, updated_by="admin", request_id="rq-2")
    for _ in range(2):
        with pytest.raises(Refused) as refused:
            await desk.products.update(change)
        assert (refused.value.code, refused.value.status) == ("not_found", 404)
    assert desk.ledger.inbox["product:rq-2"]["reply"]["error"]["code"] == "not_found"
