"""The approval record says, for the person asking, whether they may decide it and why not (SPEC §9)."""

from __future__ import annotations

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import ListApprovalsV1, PolicyQueryV1

from .conftest import actor, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]


async def test_get_says_who_may_decide_and_why_not(approvals) -> None:
    refund = await approvals.create("refund_payment", requested_by="alice")  # manager, SoD

    def verdict(reply) -> tuple:
        return reply.data["can_decide"], reply.data["cannot_decide_reason"]

    assert verdict(await approvals.get(refund["pending_id"], actor("carol", "manager"))) == (True, None)
    own = await approvals.get(refund["pending_id"], actor("alice", "requester", "manager"))
    assert verdict(own) == (False, "separation_of_duties")
    requester_only = await approvals.get(refund["pending_id"], actor("alice", "requester"))
    assert verdict(requester_only) == (False, "role")

    assert (await approvals.decide(refund, "approve", actor("carol", "manager"))).data["status"] == "approved"
    after = await approvals.get(refund["pending_id"], actor("dave", "manager"))
    assert verdict(after) == (False, "already_decided")


async def test_each_listed_item_carries_the_verdict_for_the_lister(approvals) -> None:
    session_id = uid("ses-")
    own = await approvals.create("refund_payment", session_id=session_id, requested_by="mia")
    other = await approvals.create("refund_payment", session_id=session_id, requested_by="alice")
    reply = await approvals.send(subjects.APPROVAL_QUERY_LIST,
                                 ListApprovalsV1(actor=actor("mia", "manager"), session_id=session_id),
                                 durable=False)
    verdicts = {item["pending_id"]: (item["can_decide"], item["cannot_decide_reason"])
                for item in reply.data["items"]}
    assert verdicts == {own["pending_id"]: (False, "separation_of_duties"), other["pending_id"]: (True, None)}


def verdict_of(data: dict) -> tuple:
    return data["can_decide"], data["cannot_decide_reason"]


async def test_the_decision_answer_carries_the_verdict_for_the_decider_as_get_does(approvals) -> None:
    approved = await approvals.create("submit_order", requested_by="alice")
    carol = actor("carol", "approver")
    decided = await approvals.decide(approved, "approve", carol)
    repeated = await approvals.decide(approved, "approve", carol)  # the recorded result, for the same person

    assert verdict_of(decided.data) == verdict_of(repeated.data) == (False, "already_decided")
    assert verdict_of(decided.data) == verdict_of((await approvals.get(approved["pending_id"], carol)).data)

    refund = await approvals.create("refund_payment", requested_by="alice")  # manager, separation of duties
    alice = actor("alice", "requester", "manager")
    rejected = await approvals.decide(refund, "reject", alice)  # the requester may still reject

    assert rejected.data["status"] == "rejected"
    assert verdict_of(rejected.data) == (False, "separation_of_duties")
    assert verdict_of(rejected.data) == verdict_of((await approvals.get(refund["pending_id"], alice)).data)


async def test_the_edit_answer_carries_the_verdict_for_the_editor_on_the_new_version(approvals) -> None:
    order = await approvals.create("submit_order", requested_by="alice")
    bob = actor("bob", "approver")
    edited = await approvals.edit(order, {"draft_id": "D-1", "revision": 2}, bob)
    repeated = await approvals.edit(order, {"draft_id": "D-1", "revision": 2}, bob)

    assert edited.ok and edited.data["supersedes"] == order["pending_id"]
    # Separation of duties is the default for every write tool: the editor is a party to the new version.
    assert verdict_of(edited.data) == verdict_of(repeated.data) == (False, "separation_of_duties")
    assert verdict_of(edited.data) == verdict_of((await approvals.get(edited.data["pending_id"], bob)).data)
    other = await approvals.get(edited.data["pending_id"], actor("carol", "approver"))
    assert verdict_of(other.data) == (True, None)

    refund = await approvals.create("refund_payment", requested_by="alice")
    carol = actor("carol", "manager")
    arguments = {"order_id": "O-1", "amount_minor": 400, "currency": "EUR", "channel": "original"}
    edited_refund = await approvals.edit(refund, arguments, carol)

    assert edited_refund.ok and edited_refund.data["edited_by"] == "carol"
    assert verdict_of(edited_refund.data) == (False, "separation_of_duties")  # an editor may not approve it
    assert verdict_of(edited_refund.data) == verdict_of(
        (await approvals.get(edited_refund.data["pending_id"], carol)).data)


async def test_the_policy_query_answers_the_policy_in_force(approvals) -> None:
    one = await approvals.send(subjects.APPROVAL_QUERY_POLICY, PolicyQueryV1(tool="cancel_order"), durable=False)
    assert one.ok and [(t["tool"], t["action"], t["ttl_seconds"]) for t in one.data["tools"]] == [
        ("cancel_order", "require_approval", 2)]  # the test policy's 2 s ttl
    every = await approvals.send(subjects.APPROVAL_QUERY_POLICY, PolicyQueryV1(), durable=False)
    assert every.ok and "create_order_draft" in {t["tool"] for t in every.data["tools"]}
