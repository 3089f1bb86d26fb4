"""``can_decide`` / ``cannot_decide_reason``: what the page may offer agrees with what ``decide`` accepts."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from erpilot_approval.domain.approvals import ApprovalError, decide
from erpilot_approval.domain.edits import edited_version
from erpilot_approval.domain.eligibility import cannot_decide_reason
from erpilot_approval.service_layer.mapping import record_for

from .conftest import NOW

pytestmark = pytest.mark.unit


def test_a_manager_who_requested_a_refund_is_told_separation_of_duties(make_pending) -> None:
    refund = make_pending("refund_payment", requested_by="carol")
    record = record_for(refund, "carol", ["requester", "manager"], NOW)
    assert (record.can_decide, record.cannot_decide_reason) == (False, "separation_of_duties")
    other = record_for(refund, "dave", ["manager"], NOW)
    assert (other.can_decide, other.cannot_decide_reason) == (True, None)


def test_an_editor_is_a_party_too(make_pending) -> None:
    first = make_pending("refund_payment", requested_by="bob")
    edited = edited_version(make_pending("refund_payment", requested_by="bob"), first, "ann")
    assert cannot_decide_reason(edited, "ann", ["manager"], NOW) == "separation_of_duties"


def test_without_a_required_role_the_reason_is_role_whatever_the_state(make_pending) -> None:
    refund = make_pending("refund_payment", requested_by="carol")
    assert cannot_decide_reason(refund, "bob", ["approver", "requester"], NOW) == "role"
    assert cannot_decide_reason(refund, "bob", [], NOW) == "role"
    # Roles first, as in decide: a person without the role learns nothing about the approval's state.
    assert cannot_decide_reason(replace(refund, status="approved"), "bob", ["approver"], NOW) == "role"


@pytest.mark.parametrize(("status", "reason"), [
    ("approved", "already_decided"), ("rejected", "already_decided"), ("cancelled", "already_decided"),
    ("expired", "expired"), ("superseded", "superseded"), ("withdrawn", "withdrawn"),
])
def test_a_finished_approval_says_what_finished_it(make_pending, status, reason) -> None:
    order = replace(make_pending("submit_order"), status=status)
    assert cannot_decide_reason(order, "bob", ["approver"], NOW) == reason


def test_past_the_deadline_is_expired_before_any_sweeper_ran(make_pending) -> None:
    order = make_pending("submit_order")
    assert cannot_decide_reason(order, "bob", ["approver"], order.expires_at - timedelta(seconds=1)) is None
    assert cannot_decide_reason(order, "bob", ["approver"], order.expires_at) == "expired"


ACTORS = [("bob", ["approver"]), ("carol", ["manager"]), ("alice", ["manager"]), ("alice", ["requester"]),
          ("dave", ["approver", "manager"])]


@pytest.mark.parametrize("tool", ["submit_order", "cancel_order", "adjust_stock", "refund_payment"])
@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("late", [False, True])
def test_can_decide_is_exactly_when_approve_would_be_accepted(make_pending, tool, actor, late) -> None:
    approval = make_pending(tool)  # requested by alice
    now = approval.expires_at if late else NOW
    reason = cannot_decide_reason(approval, *actor, now)
    try:
        accepted = decide(approval, "approve", approval.fingerprint, *actor, None, now).is_new
        code = None
    except ApprovalError as error:
        accepted, code = False, error.code
    assert (reason is None) == accepted
    assert code == {None: None, "role": "forbidden"}.get(reason, reason)
