"""Quorum (M of N): votes, the approval they make, and the policy that asks for them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_approval.domain.approvals import ApprovalError, decide, expire
from erpilot_approval.domain.eligibility import cannot_decide_reason
from erpilot_approval.domain.policy import PolicyError, load_policy
from erpilot_approval.service_layer.mapping import policy_view, record_of

pytestmark = pytest.mark.unit

QUORUM = load_policy("""
[tools.adjust_stock]
approvals_required = 2

[tools.refund_payment]
approvals_required = 1
[[tools.refund_payment.rules]]
min_amount_minor = 100000
roles = ["manager"]
approvals_required = 3
""")


def vote(approval, who, action="approve", roles=("manager",), at=None, comment=None):
    return decide(approval, action, approval.fingerprint, who, list(roles), comment,
                  at or approval.created_at + timedelta(seconds=1))


def test_the_policy_sets_the_quorum_per_tool_and_per_amount_rule(make_pending) -> None:
    assert make_pending("adjust_stock", policy=QUORUM).approvals_required == 2
    assert make_pending("refund_payment", amount_minor=99_999, policy=QUORUM).approvals_required == 1
    assert make_pending("refund_payment", amount_minor=100_000, policy=QUORUM).approvals_required == 3
    assert make_pending("submit_order", policy=QUORUM).approvals_required == 1  # the default
    assert policy_view(QUORUM, "adjust_stock").tools[0].approvals_required == 2


@pytest.mark.parametrize(("text", "key"), [
    ("[tools.adjust_stock]\napprovals_required = 0", "tools.adjust_stock.approvals_required"),
    ("[tools.adjust_stock]\napprovals_required = true", "tools.adjust_stock.approvals_required"),
    ("[tools.adjust_stock]\napprovals_required = '2'", "tools.adjust_stock.approvals_required"),
    ("[[tools.adjust_stock.rules]]\nmin_amount_minor = 1\nroles = ['manager']\napprovals_required = 11",
     "tools.adjust_stock.rules[0].approvals_required"),
])
def test_a_bad_quorum_is_refused_naming_the_key(text, key) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(text)
    assert str(refused.value).startswith(f"{key}: ")


def test_the_default_policy_keeps_its_version_and_a_quorum_changes_it() -> None:
    assert load_policy(None).version == load_policy("[tools.adjust_stock]\napprovals_required = 1").version
    assert load_policy(None).version != QUORUM.version


def test_approved_only_when_m_distinct_people_approved(make_pending) -> None:
    pending = make_pending("adjust_stock", policy=QUORUM)
    first = vote(pending, "mia")
    assert first.is_new and not first.ended
    assert (first.approval.status, first.approval.approvals_received) == ("pending", 1)
    assert [(v.sub, v.role, v.action) for v in first.approval.votes] == [("mia", "manager", "approve")]
    second = vote(first.approval, "max", comment="fine")
    assert second.ended
    assert (second.approval.status, second.approval.decided_by, second.approval.approvals_received) == (
        "approved", "max", 2)
    record = record_of(second.approval)
    assert (record.approvals_required, record.approvals_received) == (2, 2)
    assert [(v.sub, v.comment) for v in record.votes] == [("mia", None), ("max", "fine")]


REJECT_QUORUM = load_policy("""
[tools.adjust_stock]
approvals_required = 2
rejections_to_reject = 2

[tools.refund_payment]
[[tools.refund_payment.rules]]
min_amount_minor = 100000
roles = ["manager"]
rejections_to_reject = 3
""")


def test_the_policy_sets_the_rejections_to_reject_per_tool_and_per_amount_rule(make_pending) -> None:
    assert make_pending("adjust_stock", policy=REJECT_QUORUM).rejections_to_reject == 2
    assert make_pending("refund_payment", amount_minor=99_999, policy=REJECT_QUORUM).rejections_to_reject == 1
    assert make_pending("refund_payment", amount_minor=100_000, policy=REJECT_QUORUM).rejections_to_reject == 3
    assert make_pending("adjust_stock", policy=QUORUM).rejections_to_reject == 1  # the default: first reject
    assert policy_view(REJECT_QUORUM, "adjust_stock").tools[0].rejections_to_reject == 2
    assert record_of(make_pending("adjust_stock", policy=REJECT_QUORUM)).rejections_to_reject == 2
    assert load_policy(None).version != load_policy("[tools.adjust_stock]\nrejections_to_reject = 2").version


@pytest.mark.parametrize(("text", "key"), [
    ("[tools.adjust_stock]\nrejections_to_reject = 0", "tools.adjust_stock.rejections_to_reject"),
    ("[tools.adjust_stock]\nrejections_to_reject = false", "tools.adjust_stock.rejections_to_reject"),
    ("[tools.adjust_stock]\nrejections_to_reject = 1.5", "tools.adjust_stock.rejections_to_reject"),
    ("[[tools.adjust_stock.rules]]\nmin_amount_minor = 1\nroles = ['manager']\nrejections_to_reject = 11",
     "tools.adjust_stock.rules[0].rejections_to_reject"),
])
def test_a_bad_rejections_to_reject_is_refused_naming_the_key(text, key) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(text)
    assert str(refused.value).startswith(f"{key}: ")


def test_rejected_only_when_n_distinct_people_rejected(make_pending) -> None:
    first = vote(make_pending("adjust_stock", policy=REJECT_QUORUM), "mia", "reject", comment="wrong SKU")
    assert first.is_new and not first.ended and first.approval.status == "pending"
    assert vote(first.approval, "mia", "reject").is_new is False  # the same reject again counts once
    approved_once = vote(first.approval, "max")
    assert (approved_once.approval.status, approved_once.approval.approvals_received) == ("pending", 1)
    second = vote(approved_once.approval, "zoe", "reject", comment="agreed")
    assert second.ended
    assert (second.approval.status, second.approval.decided_by, second.approval.comment) == (
        "rejected", "zoe", "agreed")
    assert [(v.sub, v.action) for v in second.approval.votes] == [
        ("mia", "reject"), ("max", "approve"), ("zoe", "reject")]


def test_approves_still_win_while_the_rejections_fall_short(make_pending) -> None:
    first = vote(make_pending("adjust_stock", policy=REJECT_QUORUM), "mia", "reject")
    second = vote(vote(first.approval, "max").approval, "zoe")
    assert (second.approval.status, second.approval.decided_by) == ("approved", "zoe")


def test_a_cancel_still_ends_it_at_once(make_pending) -> None:
    first = vote(make_pending("adjust_stock", policy=REJECT_QUORUM), "mia", "reject")
    assert vote(first.approval, "max", "cancel").approval.status == "cancelled"


def test_the_same_person_approving_twice_counts_once(make_pending) -> None:
    first = vote(make_pending("adjust_stock", policy=QUORUM), "mia")
    again = vote(first.approval, "mia")
    assert not again.is_new and again.approval == first.approval
    with pytest.raises(ApprovalError) as refused:
        vote(first.approval, "mia", "reject")
    assert (refused.value.code, refused.value.http_status) == ("already_voted", 409)
    assert cannot_decide_reason(first.approval, "mia", ["manager"], first.approval.created_at) == "already_voted"
    assert cannot_decide_reason(first.approval, "max", ["manager"], first.approval.created_at) is None


@pytest.mark.parametrize(("action", "status"), [("reject", "rejected"), ("cancel", "cancelled")])
def test_a_reject_or_cancel_after_one_approve_ends_it(make_pending, action, status) -> None:
    first = vote(make_pending("adjust_stock", policy=QUORUM), "mia")
    ended = vote(first.approval, "max", action, comment="no")
    assert ended.ended
    assert (ended.approval.status, ended.approval.decided_by, ended.approval.comment) == (status, "max", "no")
    assert vote(ended.approval, "max", action).is_new is False  # the recorded decision
    with pytest.raises(ApprovalError, match="already_decided"):
        vote(ended.approval, "zoe")


def test_the_deadline_expires_it_whatever_the_votes(make_pending) -> None:
    first = vote(make_pending("adjust_stock", policy=QUORUM), "mia")
    expired = expire(first.approval, first.approval.expires_at)
    assert (expired.status, expired.decided_at, expired.approvals_received) == (
        "expired", first.approval.expires_at, 1)
    with pytest.raises(ApprovalError, match="expired"):
        vote(first.approval, "max", at=first.approval.expires_at)  # at the deadline, before any sweep
    with pytest.raises(ApprovalError, match="expired"):
        vote(expired, "mia")  # an earlier approve is no decision to repeat


def test_separation_of_duties_applies_to_every_voter(make_pending) -> None:
    pending = make_pending("refund_payment", amount_minor=200_000, policy=QUORUM, requested_by="mia")
    first = vote(pending, "max")
    with pytest.raises(ApprovalError, match="separation_of_duties"):
        vote(first.approval, "mia")
    assert vote(first.approval, "mia", "reject").approval.status == "rejected"


def test_a_vote_names_the_required_role_the_voter_holds(make_pending) -> None:
    pending = make_pending("submit_order", policy=load_policy("[tools.submit_order]\napprovals_required = 2"))
    first = vote(pending, "ann", roles=("requester", "approver"))
    second = vote(first.approval, "bo", roles=("approver", "manager"))
    assert [v.role for v in second.approval.votes] == ["approver", "manager"]
