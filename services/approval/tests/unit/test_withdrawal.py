"""Withdrawal of a pending approval (domain, no I/O)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_approval.domain.approvals import decide
from erpilot_approval.domain.withdrawal import may_withdraw, withdraw

pytestmark = pytest.mark.unit


def test_a_pending_approval_is_withdrawn_by_its_requester_at_now(make_pending, now) -> None:
    approval = make_pending("submit_order")

    withdrawn = withdraw(approval, "alice", now)

    assert (withdrawn.status, withdrawn.decided_by, withdrawn.decided_at) == ("withdrawn", "alice", now)
    assert withdrawn.expires_at == approval.expires_at and withdrawn.fingerprint == approval.fingerprint


def test_only_a_pending_approval_before_its_deadline_is_withdrawn(make_pending, now) -> None:
    approval = make_pending("submit_order")
    approved = decide(approval, "approve", approval.fingerprint, "bob", ["approver"], None, now).approval

    assert withdraw(approved, "alice", now) is None  # the decision came first and stands
    assert withdraw(approval, "alice", approval.expires_at) is None  # it expired; expiry records that
    assert withdraw(approval, "alice", approval.expires_at - timedelta(microseconds=1)) is not None


def test_a_withdrawn_approval_cannot_be_decided(make_pending, now) -> None:
    withdrawn = withdraw(make_pending("submit_order"), "alice", now)

    with pytest.raises(Exception) as refused:
        decide(withdrawn, "approve", withdrawn.fingerprint, "bob", ["approver"], None, now)
    assert refused.value.code == "already_decided"


def test_only_the_requester_withdraws_and_only_in_the_named_session(make_pending) -> None:
    approval = make_pending("submit_order")

    assert may_withdraw(approval, session_id=approval.session_id, actor_sub=approval.requested_by)
    assert not may_withdraw(approval, session_id="another", actor_sub=approval.requested_by)
    assert not may_withdraw(approval, session_id=approval.session_id, actor_sub="mallory")
