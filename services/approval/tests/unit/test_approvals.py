"""Pending approvals: creation, every decision code, check precedence, repeats, deadline, edits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_approval.domain.approvals import (
    ApprovalError,
    PendingApproval,
    decide,
    expire,
    new_pending,
)
from erpilot_approval.domain.edits import check_edit, supersede
from erpilot_approval.domain.permissions import can_decide, can_view
from erpilot_approval.domain.policy import load_policy
from erpilot_approval.service_layer.mapping import grant_for, record_of
from erpilot_contracts.fingerprint import fingerprint as compute_fingerprint

pytestmark = pytest.mark.unit

APPROVER = ("bob", ["approver"])
MANAGER = ("carol", ["manager"])


def decision_code(approval, action="approve", fingerprint=None, actor=APPROVER, now=None) -> str:
    """Run ``decide`` and return the error code it raises ("new" / "repeat" when it does not)."""
    sub, roles = actor
    try:
        outcome = decide(approval, action, fingerprint or approval.fingerprint, sub, roles, None,
                         now or approval.created_at)
    except ApprovalError as error:
        return error.code
    return "new" if outcome.is_new else "repeat"


def decided(approval, action="approve", by="bob", roles=("approver",)):
    """The approval after a successful new decision at its creation time."""
    outcome = decide(approval, action, approval.fingerprint, by, list(roles), None, approval.created_at)
    assert outcome.is_new
    return outcome.approval


# --- new_pending -----------------------------------------------------------------------------------

def test_new_pending_applies_the_policy_once(make_pending, now) -> None:
    pending = make_pending("submit_order", amount_minor=12_345)
    assert pending.status == "pending"
    assert pending.created_at == now
    assert pending.expires_at == now + timedelta(minutes=15)
    assert pending.required_roles == ["approver", "manager"]
    assert pending.risk == "medium"
    assert pending.policy_version == load_policy(None).version
    assert record_of(pending).expires_at == pending.expires_at


def test_amount_rule_raises_roles_and_risk(make_pending) -> None:
    pending = make_pending("submit_order", amount_minor=1_000_000)
    assert pending.required_roles == ["manager"]
    assert pending.risk == "high"


def test_refund_is_high_risk_with_separation_of_duties(make_pending) -> None:
    pending = make_pending("refund_payment", amount_minor=500)
    assert (pending.risk, pending.separation_of_duties, pending.required_roles) == ("high", True, ["manager"])


def test_ttl_comes_from_the_tool_policy(make_pending, now) -> None:
    policy = load_policy('[tools.cancel_order]\nttl = "2s"\n')
    assert make_pending("cancel_order", policy=policy).expires_at == now + timedelta(seconds=2)


def test_new_pending_refuses_denied_allowed_and_mismatched_requests(build_request, now) -> None:
    deny = load_policy("[tools.submit_order]\naction = 'deny'\n")
    allow = load_policy("[tools.submit_order]\naction = 'allow'\n")
    default = load_policy(None)
    cases = [
        (build_request(), deny, "policy_denied"),
        (build_request(), allow, "approval_not_required"),
        (build_request(fingerprint="sha256:" + "0" * 64), default, "invalid_request"),
        (build_request(preview={"amount_minor": "12"}), default, "invalid_request"),
        (build_request(preview={"amount_minor": 12.0}), default, "invalid_request"),
    ]
    for request, policy, code in cases:
        with pytest.raises(ApprovalError) as caught:
            new_pending(request, policy, now, "pa-1")
        assert caught.value.code == code


# --- decide: every code ----------------------------------------------------------------------------

@pytest.mark.parametrize(("action", "status"), [("approve", "approved"), ("reject", "rejected"),
                                                 ("cancel", "cancelled")])
def test_a_new_decision_records_who_when_and_why(make_pending, now, action, status) -> None:
    pending = make_pending()
    later = now + timedelta(minutes=1)
    outcome = decide(pending, action, pending.fingerprint, "bob", ["approver"], "ok", later)
    assert outcome.is_new
    assert (outcome.approval.status, outcome.approval.decided_by) == (status, "bob")
    assert (outcome.approval.decided_at, outcome.approval.comment) == (later, "ok")
    assert outcome.approval.expires_at == pending.expires_at


def test_forbidden_without_a_required_role(make_pending) -> None:
    pending = make_pending(amount_minor=1_000_000)  # manager only
    assert decision_code(pending, actor=APPROVER) == "forbidden"
    assert decision_code(pending, actor=("root", ["admin", "requester"])) == "forbidden"
    assert decision_code(pending, actor=MANAGER) == "new"


def test_separation_of_duties_blocks_only_the_requesters_approval(make_pending) -> None:
    pending = make_pending("refund_payment", requested_by="carol")
    assert decision_code(pending, "approve", actor=MANAGER) == "separation_of_duties"
    assert decision_code(pending, "reject", actor=MANAGER) == "new"
    assert decision_code(pending, "cancel", actor=MANAGER) == "new"
    assert decision_code(pending, "approve", actor=("dave", ["manager"])) == "new"


def test_by_default_a_requester_holding_an_approving_role_may_not_approve_their_own_write(make_pending) -> None:
    # Issue 26: a person with both the requester and the approver role approved their own submit_order (200).
    own = make_pending("submit_order", requested_by="bob")
    assert decision_code(own, actor=("bob", ["requester", "approver"])) == "separation_of_duties"
    assert decision_code(own, "reject", actor=("bob", ["requester", "approver"])) == "new"
    assert decision_code(own, actor=MANAGER) == "new"


def test_a_policy_that_turns_separation_of_duties_off_lets_the_requester_approve(make_pending) -> None:
    relaxed = load_policy("[tools.submit_order]\nseparation_of_duties = false\n")
    assert decision_code(make_pending(requested_by="bob", policy=relaxed), actor=APPROVER) == "new"


def test_superseded_already_decided_and_expired_statuses(make_pending, now) -> None:
    pending = make_pending()
    assert decision_code(supersede(pending, "pa-2", now)) == "superseded"
    assert decision_code(expire(pending, pending.expires_at)) == "expired"
    approved_by_other = decided(pending, by="eve")
    assert decision_code(approved_by_other, "approve") == "already_decided"
    assert decision_code(approved_by_other, "reject", actor=("eve", ["approver"])) == "already_decided"


def test_deadline_exactly_at_expires_at_is_expired_without_a_sweeper(make_pending) -> None:
    pending = make_pending()
    just_before = pending.expires_at - timedelta(microseconds=1)
    assert decision_code(pending, now=just_before) == "new"
    assert decision_code(pending, now=pending.expires_at) == "expired"
    assert pending.status == "pending"


def test_stale_fingerprint(make_pending) -> None:
    pending = make_pending()
    assert decision_code(pending, fingerprint=pending.fingerprint.upper()) == "stale_fingerprint"
    assert decision_code(pending, fingerprint=pending.fingerprint + " ") == "stale_fingerprint"


def test_invalid_action_is_refused_before_anything_else(make_pending) -> None:
    pending = make_pending()
    expired = expire(pending, pending.expires_at)
    for action in ("approved", "Approve", "", None, True):
        assert decision_code(expired, action, fingerprint="wrong", actor=("x", [])) == "invalid_action"


# --- precedence ------------------------------------------------------------------------------------

def test_precedence_forbidden_then_sod_then_status_then_deadline_then_fingerprint(make_pending) -> None:
    pending = make_pending("refund_payment", requested_by="carol")
    rejected = decided(pending, "reject", by="dave", roles=["manager"])
    late, wrong = pending.expires_at + timedelta(hours=1), "sha256:other"

    # Everything wrong at once: the missing role is reported first.
    assert decision_code(rejected, "approve", wrong, ("mallory", ["approver"]), late) == "forbidden"
    # The role is held but SoD applies: SoD before the status.
    assert decision_code(rejected, "approve", wrong, MANAGER, late) == "separation_of_duties"
    # Authorised: the status is reported before the deadline and the fingerprint.
    assert decision_code(rejected, "reject", wrong, MANAGER, late) == "already_decided"
    # Pending: the deadline before the fingerprint.
    assert decision_code(pending, "reject", wrong, MANAGER, late) == "expired"
    assert decision_code(pending, "reject", wrong, MANAGER, pending.created_at) == "stale_fingerprint"


# --- repeats ---------------------------------------------------------------------------------------

def test_same_person_same_action_returns_the_recorded_decision(make_pending, now) -> None:
    first = decide(make_pending(), "approve", make_pending().fingerprint, "bob", ["approver"], "first", now)
    again = decide(first.approval, "approve", first.approval.fingerprint, "bob", ["approver"], "second",
                   first.approval.expires_at + timedelta(days=1))
    assert not again.is_new
    assert again.approval == first.approval  # recorded comment and time, not the repeat's


def test_a_repeat_is_not_granted_to_another_action_person_or_fingerprint(make_pending, now) -> None:
    approved = decided(make_pending())
    assert decision_code(approved, "approve", actor=APPROVER) == "repeat"
    assert decision_code(approved, "reject", actor=APPROVER) == "already_decided"
    assert decision_code(approved, "approve", actor=("zoe", ["approver"])) == "already_decided"
    assert decision_code(approved, fingerprint="sha256:other", actor=APPROVER) == "stale_fingerprint"


# --- expiry, visibility, edits ---------------------------------------------------------------------

def test_expire_only_pending_approvals_at_or_after_the_deadline(make_pending, now) -> None:
    pending = make_pending()
    assert expire(pending, pending.expires_at - timedelta(microseconds=1)) is None
    expired = expire(pending, pending.expires_at + timedelta(seconds=3))
    assert expired is not None
    assert (expired.status, expired.decided_at, expired.decided_by) == ("expired", pending.expires_at, None)
    approved = decided(pending)
    assert expire(approved, pending.expires_at + timedelta(days=1)) is None
    assert expire(expired, pending.expires_at + timedelta(days=1)) is None


def test_can_view_and_can_decide(make_pending) -> None:
    pending = make_pending("refund_payment", requested_by="carol")
    assert can_view(pending, "carol", ["requester"])
    assert can_view(pending, "dave", ["manager"])
    assert not can_view(pending, "bob", ["approver"])
    assert can_decide(pending, "dave", ["manager"])
    assert not can_decide(pending, "carol", ["manager"])
    assert can_decide(pending, "carol", ["manager"], action="reject")
    assert not can_decide(pending, "bob", ["approver"], action="reject")


def test_check_edit_runs_the_approve_checks(make_pending, now) -> None:
    pending = make_pending("refund_payment", requested_by="carol")
    check_edit(pending, pending.fingerprint, "dave", ["manager"], now)
    cases = [
        (pending, pending.fingerprint, ("bob", ["approver"]), now, "forbidden"),
        (pending, pending.fingerprint, ("carol", ["manager"]), now, "separation_of_duties"),
        (supersede(pending, "pa-2", now), pending.fingerprint, ("dave", ["manager"]), now, "superseded"),
        (pending, pending.fingerprint, ("dave", ["manager"]), pending.expires_at, "expired"),
        (pending, "sha256:old", ("dave", ["manager"]), now, "stale_fingerprint"),
    ]
    for approval, fingerprint, (sub, roles), at, code in cases:
        with pytest.raises(ApprovalError) as caught:
            check_edit(approval, fingerprint, sub, roles, at)
        assert caught.value.code == code


def test_an_edit_keeps_the_call_tool_and_requester_and_gets_a_fresh_ttl(make_pending, build_request, now) -> None:
    old = make_pending("submit_order")
    arguments = {"draft_id": "D-1", "revision": 3}
    new_fingerprint = compute_fingerprint("submit_order", 1, arguments)
    request = build_request("submit_order", arguments=arguments, operation_id="op-2")  # as the ledger sends it
    later = now + timedelta(minutes=10)
    new = new_pending(request, load_policy(None), later, "pa-2", supersedes=old.pending_id)
    ended = supersede(old, new.pending_id, later, decided_by="bob")

    assert (new.call_id, new.tool, new.requested_by) == (old.call_id, old.tool, "alice")
    assert (new.fingerprint, new.operation_id, new.supersedes) == (new_fingerprint, "op-2", "pa-1")
    assert new.expires_at == later + timedelta(minutes=15)
    assert (ended.status, ended.superseded_by, ended.decided_by) == ("superseded", "pa-2", "bob")
    assert ended.expires_at == old.expires_at
    with pytest.raises(ApprovalError):
        supersede(ended, "pa-3", later)


def test_expires_at_never_changes(make_pending, now) -> None:
    pending = make_pending()
    results = [
        decide(pending, action, pending.fingerprint, "bob", ["approver"], "c", now).approval
        for action in ("approve", "reject", "cancel")
    ]
    results += [expire(pending, pending.expires_at), supersede(pending, "pa-2", now)]
    # A reload rebuilds the approval from its stored record, deadline included, never from the policy.
    # Not stored on the row: computed per caller, or read from the votes table.
    per_viewer = {"schema_version", "can_decide", "cannot_decide_reason", "can_decide_for", "approvals_received",
                  "votes"}
    results.append(PendingApproval(**record_of(pending).model_dump(exclude=per_viewer)))
    assert all(result.expires_at == pending.expires_at for result in results)


def test_grant_for_only_an_approved_approval(make_pending, now) -> None:
    pending = make_pending()
    approved = decide(pending, "approve", pending.fingerprint, "bob", ["approver"], None, now).approval
    grant = grant_for(approved)
    assert (grant.pending_id, grant.operation_id, grant.fingerprint) == ("pa-1", "op-1", pending.fingerprint)
    assert (grant.decided_by, grant.decided_at, grant.signature) == ("bob", now, "")
    with pytest.raises(ValueError):
        grant_for(pending)


def test_stock_check_of_the_policy_travels_into_the_grant(make_pending, now) -> None:
    assert make_pending("cancel_order").stock_check is None
    sufficient = load_policy("[tools.submit_order]\nstock_check = 'sufficient'\n")
    for policy, expected in ((load_policy(None), "exact"), (sufficient, "sufficient")):
        pending = make_pending("submit_order", policy=policy)
        assert pending.stock_check == record_of(pending).stock_check == expected
        approved = decide(pending, "approve", pending.fingerprint, "bob", ["approver"], None, now).approval
        assert grant_for(approved).stock_check == expected
