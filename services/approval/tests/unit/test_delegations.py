"""Delegation (SPEC §10) on the memory unit of work: giving, listing and revoking; a delegate deciding with the
delegator's roles for the delegated tools until ``until``, the vote and the decision naming both people;
separation of duties for both; the refusals (422 to oneself, in the past, a chain; 404 someone else's)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from erpilot_approval.domain.policy import load_policy
from erpilot_approval.service_layer.delegations import give_delegation, list_delegations, revoke_delegation
from erpilot_approval.service_layer.queries import get_approval, list_approvals
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import (
    Actor,
    ApprovalRecordV1,
    GetApprovalV1,
    GiveDelegationV1,
    ListApprovalsV1,
    ListDelegationsV1,
    RevokeDelegationV1,
)

from ..fakes import NOW
from .conftest import Desk, refusal_of

pytestmark = pytest.mark.unit

BOB = Actor(sub="bob", roles=["manager"])  # the delegator, away
ANA = Actor(sub="ana", roles=["requester"])  # his delegate: no deciding role of her own
FRIDAY = NOW + timedelta(days=3)


async def give(desk: Desk, actor: Actor = BOB, to: str = "ana", *, until: datetime = FRIDAY,
               tools: list[str] | None = None, delegation_id: str | None = None):
    cmd = GiveDelegationV1(delegation_id=delegation_id or f"dlg_{len(desk.state.delegations) + 1}", to=to,
                           until=until, tools=tools, actor=actor)
    return await give_delegation(cmd, desk.ports)


async def revoke(desk: Desk, delegation_id: str, actor: Actor = BOB):
    return await revoke_delegation(RevokeDelegationV1(delegation_id=delegation_id, actor=actor), desk.ports)


async def seen_by(desk: Desk, actor: Actor, record: dict) -> ApprovalRecordV1:
    return await get_approval(GetApprovalV1(pending_id=record["pending_id"], actor=actor), desk.ports)


async def listed_for(desk: Desk, actor: Actor) -> list[str]:
    page = await list_approvals(ListApprovalsV1(actor=actor), desk.ports)
    return [item.pending_id for item in page.items]


def kinds(desk: Desk) -> list[str]:
    return [row.kind for row in desk.state.audit]


# --- giving, listing, revoking ---------------------------------------------------------------------------------
async def test_a_delegation_is_given_with_the_givers_deciding_roles_listed_for_both_and_audited(desk):
    given = await give(desk, Actor(sub="bob", roles=["manager", "approver", "admin", "requester"]))

    assert given.model_dump(mode="json") | {"until": None, "created_at": None} == {
        "schema_version": 1, "delegation_id": "dlg_1", "from": "bob", "to": "ana", "until": None, "tools": None,
        "roles": ["approver", "manager"], "created_at": None, "revoked_at": None}  # admin powers are never lent
    assert (given.until, given.created_at) == (FRIDAY, NOW)
    for person in (BOB, ANA):  # given and received
        page = await list_delegations(ListDelegationsV1(actor=person), desk.ports)
        assert [d.delegation_id for d in page.items] == ["dlg_1"]
    stranger = await list_delegations(ListDelegationsV1(actor=Actor(sub="zoe", roles=["manager"])), desk.ports)
    assert stranger.items == []
    [row] = desk.state.audit
    assert (row.kind, row.actor, row.data["to"], row.data["tools"]) == ("delegation_given", "bob", "ana", None)


async def test_a_redelivered_give_stores_one_delegation_and_another_give_under_its_id_is_a_conflict(desk):
    first = await give(desk, delegation_id="dlg_x", tools=["refund_payment", "submit_order"])
    again = await give(desk, delegation_id="dlg_x", tools=["submit_order", "refund_payment"])

    assert again == first and first.tools == ["submit_order", "refund_payment"]  # catalog order
    assert len(desk.state.delegations) == 1 and kinds(desk) == ["delegation_given"]
    refused = await refusal_of(give(desk, delegation_id="dlg_x", to="carl"))
    assert (refused.code, refused.status) == ("idempotency_conflict", 409)


@pytest.mark.parametrize(("changes", "code"), [
    ({"to": "bob"}, "delegation_to_self"),
    ({"until": NOW}, "delegation_in_past"),
    ({"until": NOW - timedelta(seconds=1)}, "delegation_in_past"),
    ({"until": NOW + timedelta(days=91)}, "delegation_too_long"),
    ({"tools": []}, "invalid_tools"),
    ({"tools": ["search_products"]}, "invalid_tools"),
    ({"tools": ["submit_order", "launch_rocket"]}, "invalid_tools"),
])
async def test_a_delegation_to_oneself_into_the_past_or_of_no_write_tool_is_refused_422(desk, changes, code):
    refused = await refusal_of(give(desk, **changes))

    assert (refused.code, refused.status) == (code, 422)
    assert desk.state.delegations == {} and desk.state.audit == []  # nothing stored, nothing audited


async def test_only_an_approver_or_a_manager_delegates(desk):
    refused = await refusal_of(give(desk, Actor(sub="rita", roles=["requester", "admin"])))

    assert (refused.code, refused.status) == ("forbidden", 403)


async def test_a_delegate_may_not_delegate_further_nor_may_anyone_delegate_to_a_delegator(desk):
    await give(desk, BOB, "ana")  # bob -> ana
    ana_approver = Actor(sub="ana", roles=["approver"])

    onward = await refusal_of(give(desk, ana_approver, "carl"))  # ana -> carl: bob -> ana -> carl
    assert (onward.code, onward.status) == ("delegation_chain", 422)
    inward = await refusal_of(give(desk, Actor(sub="dora", roles=["manager"]), "bob"))  # dora -> bob -> ana
    assert (inward.code, inward.status) == ("delegation_chain", 422)
    narrower = await refusal_of(give(desk, ana_approver, "carl", tools=["cancel_order"]))  # whatever the tools
    assert narrower.code == "delegation_chain"
    assert len(desk.state.delegations) == 1

    # Once bob's delegation ends, ana may delegate her own approvals.
    await revoke(desk, "dlg_1")
    assert (await give(desk, ana_approver, "carl")).to == "carl"


async def test_a_chain_check_counts_only_delegations_in_force(desk):
    await give(desk, BOB, "ana", until=NOW + timedelta(hours=1))
    desk.uow.advance(timedelta(hours=1))  # bob's ended at its until

    assert (await give(desk, Actor(sub="ana", roles=["approver"]), "carl")).to == "carl"


async def test_the_delegator_revokes_at_once_and_again_harmlessly_and_nobody_else_can(desk):
    await give(desk)
    for intruder in (ANA, Actor(sub="zoe", roles=["manager"])):  # the delegate too: it is not theirs
        refused = await refusal_of(revoke(desk, "dlg_1", intruder))
        assert (refused.code, refused.status) == ("not_found", 404)
    unknown = await refusal_of(revoke(desk, "dlg_nope"))
    assert (unknown.code, unknown.status) == ("not_found", 404)
    desk.uow.advance(timedelta(minutes=5))

    revoked = await revoke(desk, "dlg_1")
    assert revoked.revoked_at == NOW + timedelta(minutes=5)
    assert (await revoke(desk, "dlg_1")).revoked_at == revoked.revoked_at  # the recorded revocation
    assert kinds(desk) == ["delegation_given", "delegation_revoked"]
    assert (await list_delegations(ListDelegationsV1(actor=BOB), desk.ports)).items == []


# --- deciding as a delegate ------------------------------------------------------------------------------------
@pytest.fixture
def desk() -> Desk:
    # adjust_stock: manager only, so ana (requester) can reach it through bob alone.
    return Desk(load_policy(None))


async def test_a_delegate_sees_decides_and_is_recorded_with_the_delegator(desk):
    record = await desk.request("adjust_stock", requested_by="rita")
    assert await listed_for(desk, ANA) == []
    await give(desk)

    assert await listed_for(desk, ANA) == [record["pending_id"]]
    seen = await seen_by(desk, ANA, record)
    assert (seen.can_decide, seen.cannot_decide_reason, seen.can_decide_for) == (True, None, "bob")

    decided = await desk.decide(record, "approve", "ana", "requester", comment="for bob")
    assert (decided.status, decided.decided_by, decided.decided_on_behalf_of) == ("approved", "ana", "bob")
    assert [(v.sub, v.role, v.on_behalf_of) for v in decided.votes] == [("ana", "manager", "bob")]
    [resolved] = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    assert (resolved["decided_by"], resolved["decided_on_behalf_of"]) == ("ana", "bob")
    assert desk.state.grants[record["pending_id"]].decided_by == "ana"  # the person who approved
    assert [(d.actor, d.on_behalf_of) for d in desk.state.decisions] == [("ana", "bob")]
    vote_row = next(row for row in desk.state.audit if row.kind == "vote")
    decision_row = next(row for row in desk.state.audit if row.kind == "decision")
    assert (vote_row.actor, vote_row.data["on_behalf_of"]) == ("ana", "bob")
    assert (decision_row.actor, decision_row.data["on_behalf_of"]) == ("ana", "bob")


async def test_someone_who_may_decide_in_their_own_right_decides_as_themselves(desk):
    record = await desk.request("adjust_stock", requested_by="rita")
    await give(desk, BOB, "max")

    decided = await desk.decide(record, "approve", "max", "manager")
    assert (decided.decided_by, decided.decided_on_behalf_of) == ("max", None)
    assert decided.votes[0].on_behalf_of is None


async def test_a_delegation_covers_its_tools_only(desk):
    stock = await desk.request("adjust_stock", requested_by="rita")
    refund = await desk.request("refund_payment", requested_by="rita")
    await give(desk, tools=["refund_payment"])

    assert await listed_for(desk, ANA) == [refund["pending_id"]]
    refused = await refusal_of(desk.decide(stock, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("forbidden", 403)
    assert (await desk.decide(refund, "approve", "ana", "requester")).decided_on_behalf_of == "bob"


async def test_a_delegate_decides_only_what_the_delegators_roles_may(desk):
    order = await desk.request("cancel_order", requested_by="rita")  # approver only; bob is a manager
    await give(desk)

    refused = await refusal_of(desk.decide(order, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("forbidden", 403)
    assert await listed_for(desk, ANA) == []


async def test_a_revoked_delegation_decides_nothing_more(desk):
    record = await desk.request("adjust_stock", requested_by="rita")
    await give(desk)
    await revoke(desk, "dlg_1")

    refused = await refusal_of(desk.decide(record, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("forbidden", 403)
    assert await listed_for(desk, ANA) == []
    assert desk.approval(record["pending_id"]).status == "pending"


async def test_a_delegation_ends_at_its_until(desk):
    record = await desk.request("adjust_stock", requested_by="rita")
    await give(desk, until=NOW + timedelta(minutes=10))
    desk.uow.advance(timedelta(minutes=10))  # at until: over

    refused = await refusal_of(desk.decide(record, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("forbidden", 403)
    assert await listed_for(desk, ANA) == []
    hidden = await refusal_of(seen_by(desk, ANA, record))
    assert hidden.code == "not_found"  # no longer hers to see
    assert (await list_delegations(ListDelegationsV1(actor=ANA), desk.ports)).items == []


# --- separation of duties for both people -----------------------------------------------------------------------
async def test_a_requester_never_reaches_their_own_approval_through_a_delegate(desk):
    record = await desk.request("adjust_stock", requested_by="bob")  # bob requested it himself
    await give(desk)

    seen = await seen_by(desk, ANA, record)
    assert (seen.can_decide, seen.cannot_decide_reason) == (False, "separation_of_duties")
    refused = await refusal_of(desk.decide(record, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("separation_of_duties", 403)
    assert desk.approval(record["pending_id"]).status == "pending"
    # Rejecting stays allowed, as it is to bob himself.
    rejected = await desk.decide(record, "reject", "ana", "requester", comment="not like this")
    assert (rejected.status, rejected.decided_on_behalf_of) == ("rejected", "bob")


async def test_a_delegate_who_requested_it_cannot_approve_it_for_someone_else(desk):
    record = await desk.request("adjust_stock", requested_by="ana")  # ana requested it
    await give(desk)  # and is bob's delegate

    refused = await refusal_of(desk.decide(record, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("separation_of_duties", 403)
    assert (await seen_by(desk, ANA, record)).cannot_decide_reason == "separation_of_duties"


# --- one vote per authority (quorum) ----------------------------------------------------------------------------
async def test_a_delegators_authority_counts_once_in_a_quorum():
    desk = Desk(load_policy('[tools.adjust_stock]\napprovals_required = 2\n'))
    record = await desk.request("adjust_stock", requested_by="rita")
    await give(desk)
    first = await desk.decide(record, "approve", "ana", "requester")  # for bob
    assert (first.status, first.approvals_received) == ("pending", 1)

    twice = await refusal_of(desk.decide(record, "approve", "bob", "manager"))  # bob, back: his vote is cast
    assert (twice.code, twice.status) == ("already_voted", 409)
    assert (await seen_by(desk, BOB, record)).cannot_decide_reason == "already_voted"
    second = await desk.decide(record, "approve", "max", "manager")
    assert (second.status, second.approvals_received) == ("approved", 2)
    assert [(v.sub, v.on_behalf_of) for v in second.votes] == [("ana", "bob"), ("max", None)]
