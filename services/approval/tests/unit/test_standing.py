"""Standing approvals (SPEC §11, issue 34): what one covers (session, tool, cap, until, revoked), the giver's
authority now (people directory) and separation of duties for the giver; giving refused beyond what the giver may
decide; and on the memory unit of work, a covered request approved at once with its commit in the outbox, and a
chat run's calls approved at once only until its owner ended the run and up to ``[standing] max_writes_per_run``
(security follow-up of #32/#34)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from erpilot_approval.domain import standing, standing_runs
from erpilot_approval.domain.policy import load_policy
from erpilot_approval.domain.policy_values import PolicyError
from erpilot_approval.domain.standing import StandingApproval, StandingError
from erpilot_approval.service_layer.requests import request_approval
from erpilot_approval.service_layer.standing import end_run, give_standing, list_standing, revoke_standing
from erpilot_approval.service_layer.withdrawals import withdraw_cancelled_run
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.approval.standing import (
    EndRunV1,
    GiveStandingApprovalV1,
    ListStandingApprovalsV1,
    RevokeStandingApprovalV1,
)
from erpilot_contracts.approval.v1 import Actor
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.refusals import InvalidMessage

from ..fakes import NOW, MemoryApprovalRepository
from .conftest import ASSERTION_KEY, Desk, refusal_of

pytestmark = pytest.mark.unit

POLICY = load_policy(None)  # submit_order: approver or manager; from 1,000,000 minor units, manager only
BOB = Actor(sub="bob", roles=["approver"])


def given(**changes) -> StandingApproval:
    terms = {"giver": "bob", "giver_roles": ["approver"], "session_id": "sess-1", "tool": "submit_order",
             "max_amount_minor": 50_000, "until": NOW + timedelta(days=1), "now": NOW, "policy": POLICY}
    return standing.give("sa_1", **{**terms, **changes})


# --- what a standing approval covers ------------------------------------------------------------------------

@pytest.mark.parametrize("amount, covered", [(50_000, True), (1, True), (50_001, False), (None, False)])
def test_it_covers_its_session_and_tool_up_to_the_cap(make_pending, amount, covered):
    assert given().covers(make_pending(amount_minor=amount), NOW) is covered


def test_it_covers_no_other_session_or_tool(make_pending):
    assert not given(session_id="sess-2").covers(make_pending(), NOW)
    assert not given(tool="cancel_order").covers(make_pending(), NOW)


def test_without_a_cap_it_covers_any_amount_the_giver_may_decide(make_pending):
    no_cap = given(giver_roles=["manager"], max_amount_minor=None)
    assert no_cap.covers(make_pending(amount_minor=5_000_000), NOW)
    assert standing.apply(make_pending(amount_minor=5_000_000), [no_cap], None, NOW) is not None


def test_it_covers_nothing_once_revoked_or_past_until(make_pending):
    one = given()
    assert not replace(one, revoked_at=NOW).covers(make_pending(), NOW)
    assert not one.covers(make_pending(), one.until)


def test_apply_approves_as_the_standing_approval_on_behalf_of_its_giver(make_pending):
    outcome = standing.apply(make_pending(), [given()], None, NOW)

    decided = outcome.approval
    assert (decided.status, decided.decided_by, decided.decided_on_behalf_of) == ("approved", "standing:sa_1", "bob")
    assert (outcome.vote.sub, outcome.vote.on_behalf_of, outcome.vote.role) == ("standing:sa_1", "bob", "approver")


def test_a_giver_who_lost_the_role_approves_nothing(make_pending):
    assert standing.apply(make_pending(), [given()], {"bob": ("requester",)}, NOW) is None
    assert standing.apply(make_pending(), [given()], {"someone_else": ("approver",)}, NOW) is None
    assert standing.apply(make_pending(), [given()], {"bob": ("approver",)}, NOW) is not None


def test_separation_of_duties_applies_to_the_giver(make_pending):
    assert standing.apply(make_pending(requested_by="bob"), [given()], None, NOW) is None


def test_quorum_counts_it_as_the_givers_one_vote(make_pending):
    policy = load_policy('[tools.submit_order]\napprovals_required = 2\n')
    outcome = standing.apply(make_pending(policy=policy), [given(policy=policy)], None, NOW)

    assert outcome.approval.status == "pending"
    assert outcome.approval.approvals_received == 1


# --- giving: what the giver may decide, and bad input ------------------------------------------------------

@pytest.mark.parametrize("changes, code, status", [
    ({"tool": "no_such_tool"}, "unknown_tool", 422),
    ({"tool": "get_product"}, "not_a_write_tool", 422),
    ({"max_amount_minor": -1}, "invalid_amount", 422),
    ({"until": NOW}, "standing_in_past", 422),
    ({"until": NOW + timedelta(days=90, seconds=1)}, "standing_too_long", 422),
    ({"tool": "refund_payment"}, "standing_beyond_authority", 403),  # managers only
    ({"max_amount_minor": 1_000_000}, "standing_beyond_authority", 403),  # the amount rule: managers only
    ({"max_amount_minor": None}, "standing_beyond_authority", 403),  # no cap reaches the amount rule too
    ({"giver_roles": ["requester"]}, "standing_beyond_authority", 403),
])
def test_giving_refuses_what_the_giver_may_not_decide_and_bad_input(changes, code, status):
    with pytest.raises(StandingError) as raised:
        given(**changes)
    assert (raised.value.code, raised.value.http_status) == (code, status)


def test_giving_up_to_the_amount_rule_and_for_90_days_is_allowed():
    one = given(max_amount_minor=999_999, until=NOW + timedelta(days=90))
    assert (one.roles, one.max_amount_minor) == (("approver",), 999_999)


# --- the use cases on the memory unit of work -------------------------------------------------------------

def give_cmd(actor: Actor = BOB, **changes) -> GiveStandingApprovalV1:
    terms = {"standing_id": "sa_1", "session_id": "sess-1", "tool": "submit_order", "max_amount_minor": 50_000,
             "until": NOW + timedelta(days=1), "actor": actor}
    return GiveStandingApprovalV1(**{**terms, **changes})


async def test_a_covered_request_is_approved_at_once_with_its_commit_in_the_same_outbox(desk: Desk):
    await give_standing(give_cmd(), desk.ports)

    record = await desk.request(amount_minor=40_000)

    assert (record["status"], record["decided_by"], record["decided_on_behalf_of"]) == (
        "approved", "standing:sa_1", "bob")
    resolved = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    assert [(e["status"], e["decided_by"]) for e in resolved] == [("approved", "standing:sa_1")]
    assert [c["operation_id"] for c in desk.events(subjects.ERP_CMD_COMMIT)] == [record["operation_id"]]
    decision = next(row for row in desk.state.audit if row.kind == "decision")
    assert (decision.actor, decision.data["on_behalf_of"]) == ("standing:sa_1", "bob")


async def test_one_calls_assertion_gets_one_write_approved_not_more_with_other_operations(desk: Desk):
    """Security review of #32: requests of more operations for one call (one direct call's assertion, other
    arguments) are refused before anything is stored, so the standing approval approves the first alone (the
    ledger prepares one per call; this holds if a ledger let more through)."""
    await give_standing(give_cmd(), desk.ports)
    first = await desk.request(amount_minor=100, call_id="call-1", operation_id="op-1")

    for n, amount in ((2, 49_000), (3, 48_000)):
        with pytest.raises(InvalidMessage) as refused:
            await desk.request(amount_minor=amount, call_id="call-1", operation_id=f"op-{n}")
        assert refused.value.reason == "call_already_requested"

    assert first["status"] == "approved" and len(desk.state.approvals) == 1
    assert [c["operation_id"] for c in desk.events(subjects.ERP_CMD_COMMIT)] == ["op-1"]


async def test_a_twin_delivery_committed_between_the_two_reads_is_a_repeat_not_a_second_call(desk: Desk,
                                                                                                monkeypatch):
    """CI's duplicate-delivery soak: two deliveries of one request ran at once; the second looked the operation up
    before the first committed and the call's first request up after, and was dead-lettered as
    call_already_requested. It is the same operation: answered as the repeat it is."""
    cmd = desk.request_cmd(call_id="call-1", operation_id="op-1")
    first = await request_approval(cmd, desk.ports)
    looked_up = MemoryApprovalRepository.get_by_operation
    misses = iter([True])

    async def before_the_twin_committed(self, operation_id: str, *, votes: bool = True):
        return None if next(misses, False) else await looked_up(self, operation_id, votes=votes)

    monkeypatch.setattr(MemoryApprovalRepository, "get_by_operation", before_the_twin_committed)
    again = await request_approval(cmd, desk.ports)

    assert again == first and len(desk.state.approvals) == 1


async def test_over_the_cap_or_after_revocation_a_request_waits_for_a_person(desk: Desk):
    await give_standing(give_cmd(), desk.ports)
    over = await desk.request(amount_minor=60_000)
    await revoke_standing(RevokeStandingApprovalV1(standing_id="sa_1", actor=BOB), desk.ports)
    after = await desk.request(amount_minor=10_000)

    assert (over["status"], after["status"]) == ("pending", "pending")
    assert desk.events(subjects.ERP_CMD_COMMIT) == []
    assert [row.kind for row in desk.state.audit if row.kind.startswith("standing")] == [
        "standing_given", "standing_revoked"]


async def test_a_refused_give_records_nothing_and_only_the_giver_or_an_admin_revokes(desk: Desk):
    refused = await refusal_of(give_standing(give_cmd(tool="refund_payment"), desk.ports))
    assert (refused.code, refused.status) == ("standing_beyond_authority", 403)
    assert desk.state.standing == {} and desk.state.audit == []

    await give_standing(give_cmd(), desk.ports)
    other = Actor(sub="carol", roles=["approver"])
    assert (await refusal_of(revoke_standing(RevokeStandingApprovalV1(standing_id="sa_1", actor=other),
                                             desk.ports))).status == 404
    assert [s.standing_id for s in (await list_standing(ListStandingApprovalsV1(actor=other), desk.ports)).items] == []
    admin = Actor(sub="root", roles=["admin"])
    everyone = await list_standing(ListStandingApprovalsV1(actor=admin), desk.ports)
    assert [s.given_by for s in everyone.items] == ["bob"]
    revoked = await revoke_standing(RevokeStandingApprovalV1(standing_id="sa_1", actor=admin), desk.ports)
    assert revoked.revoked_at == NOW


async def test_the_giver_is_checked_against_the_people_directory_when_the_write_comes(desk: Desk):
    await give_standing(give_cmd(), desk.ports)  # bob's token said approver when he gave it
    desk.ports = replace(desk.ports, people=lambda: {"bob": ("requester",)})  # ... the directory says no more

    record = await desk.request(amount_minor=40_000)

    assert (record["status"], record["decided_by"]) == ("pending", None)
    assert desk.events(subjects.ERP_CMD_COMMIT) == []


# --- a chat run's calls: until the run ended, and at most max_writes_per_run (security follow-up of #32/#34) ----

def cancel_assertion(run_id: str, *, sub: str = "alice", session_id: str = "sess-1", cancel: bool = True) -> str:
    """What the gateway signs for the owner's cancel of ``run_id`` (``cancel=False``: the run's own assertion,
    which the agent holds)."""
    return sign_assertion(ASSERTION_KEY, sub=sub, roles=["requester"], session_id=session_id, run_id=run_id,
                          cancel=cancel, now=NOW)


def ended_by_gateway(run_id: str, **changes) -> EndRunV1:
    return EndRunV1(**{"session_id": "sess-1", "run_id": run_id, "owner": "alice",
                       "assertion": cancel_assertion(run_id), **changes})


def audited(desk: Desk, kind: str) -> list:
    return [row for row in desk.state.audit if row.kind == kind]


async def test_a_runs_calls_are_approved_at_once_until_its_owner_cancels_then_they_wait_for_a_person(desk: Desk):
    """The hole: holding the run's assertion for an hour, the agent makes up calls ``<run_id>:<anything>``, each
    prepared once by the ledger and approved at once, even after the person cancelled the run."""
    await give_standing(give_cmd(), desk.ports)
    before = await desk.request(amount_minor=100, run_id="run-1")
    assert (before["status"], before["decided_by"]) == ("approved", "standing:sa_1")

    ended = await end_run(ended_by_gateway("run-1"), desk.ports, stored_at=NOW)
    made_up = await desk.request(amount_minor=100, run_id="run-1")  # the agent's next call of the cancelled run

    assert (ended.ended_by, ended.ended_at, ended.standing_approved) == ("alice", NOW, 1)
    assert (made_up["status"], made_up["decided_by"]) == ("pending", None)
    assert [c["operation_id"] for c in desk.events(subjects.ERP_CMD_COMMIT)] == [before["operation_id"]]
    [end] = audited(desk, "run_ended")
    assert (end.actor, end.data["run_id"], end.data["session_id"]) == ("alice", "run-1", "sess-1")
    [withheld] = audited(desk, "standing_withheld")
    assert (withheld.pending_id, withheld.actor, withheld.data["reason"], withheld.data["run_id"]) == (
        made_up["pending_id"], "standing:sa_1", "run_ended", "run-1")
    # not refused: it waits like an uncovered one, and a person may still approve it
    approved = await desk.decide(made_up, "approve", "carol", "approver")
    assert (approved.status, approved.decided_by) == ("approved", "carol")
    # another run of the session and a direct call are not that run
    other_run, direct = await desk.request(amount_minor=100, run_id="run-2"), await desk.request(amount_minor=100)
    assert (other_run["status"], direct["status"]) == ("approved", "approved")


async def test_the_agents_record_of_the_cancel_ends_the_run_too(desk: Desk):
    await give_standing(give_cmd(), desk.ports)
    await withdraw_cancelled_run(RunCancelledV1(session_id="sess-1", run_id="run-1", owner="alice", call_ids=[],
                                                cancelled_at=NOW, assertion=cancel_assertion("run-1")),
                                 desk.ports, stored_at=NOW)

    made_up = await desk.request(amount_minor=100, run_id="run-1")

    assert (made_up["status"], made_up["decided_by"]) == ("pending", None)
    assert [row.data["reason"] for row in audited(desk, "standing_withheld")] == ["run_ended"]


@pytest.mark.parametrize("changes, reason", [
    ({"assertion": cancel_assertion("run-1", cancel=False)}, "assertion_call_mismatch"),  # the run's, the agent's
    ({"assertion": cancel_assertion("run-2")}, "assertion_call_mismatch"),  # another run's cancel
    ({"owner": "mallory"}, "assertion_subject_mismatch"),
    ({"assertion": cancel_assertion("run-1", session_id="sess-2")}, "assertion_session_mismatch"),
])
async def test_only_the_gateways_assertion_of_the_owners_cancel_ends_a_run(desk: Desk, changes, reason):
    await give_standing(give_cmd(), desk.ports)

    with pytest.raises(InvalidMessage) as refused:
        await end_run(ended_by_gateway("run-1", **changes), desk.ports, stored_at=NOW)

    assert refused.value.reason == reason
    assert desk.state.standing_runs == {} and audited(desk, "run_ended") == []
    assert (await desk.request(amount_minor=100, run_id="run-1"))["status"] == "approved"


async def test_ending_a_run_again_keeps_its_first_end(desk: Desk):
    await end_run(ended_by_gateway("run-1"), desk.ports, stored_at=NOW)
    desk.uow.advance(timedelta(seconds=5))
    again = await end_run(ended_by_gateway("run-1"), desk.ports, stored_at=NOW)

    assert again.ended_at == NOW and len(audited(desk, "run_ended")) == 1


async def test_standing_approvals_approve_at_most_max_writes_per_run_of_one_run():
    desk = Desk(load_policy("[standing]\nmax_writes_per_run = 2\n"))
    await give_standing(give_cmd(), desk.ports)

    statuses = [(await desk.request(amount_minor=100, run_id="run-1"))["status"] for _ in range(4)]
    others = [(await desk.request(amount_minor=100, run_id="run-2"))["status"],
              (await desk.request(amount_minor=100))["status"]]  # another run, a direct call: not counted

    assert statuses == ["approved", "approved", "pending", "pending"]
    assert others == ["approved", "approved"]
    assert len(desk.events(subjects.ERP_CMD_COMMIT)) == 4
    withheld = audited(desk, "standing_withheld")
    assert [(row.data["reason"], row.data["standing_approved"], row.data["max_writes_per_run"]) for row in withheld] \
        == [("run_limit_reached", 2, 2)] * 2
    assert desk.state.standing_runs[("sess-1", "run-1")].approved == 2


async def test_a_run_call_no_standing_approval_covers_is_not_counted(desk: Desk):
    """Over the cap it waits anyway, and uses none of the run's standing approvals."""
    await give_standing(give_cmd(), desk.ports)
    over = await desk.request(amount_minor=60_000, run_id="run-1")

    assert over["status"] == "pending" and audited(desk, "standing_withheld") == []
    assert desk.state.standing_runs[("sess-1", "run-1")] == standing_runs.StandingRun("sess-1", "run-1")


def test_max_writes_per_run_defaults_to_5_and_a_bad_value_stops_start_up():
    assert load_policy(None).max_writes_per_run == 5
    assert load_policy("[standing]\nmax_writes_per_run = 0\n").max_writes_per_run == 0
    for text in ("max_writes_per_run = -1", "max_writes_per_run = true", 'max_writes_per_run = "5"', "limit = 3"):
        with pytest.raises(PolicyError) as refused:
            load_policy(f"[standing]\n{text}\n")
        assert "standing." in str(refused.value)
