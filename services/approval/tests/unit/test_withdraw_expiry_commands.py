"""Withdrawals and the expiry sweep on the memory unit of work: the agent's record of a cancel withdraws only the
pending approvals its owner requested, and only when the gateway vouched for that owner; the sweep expires what
is due once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_approval.service_layer.expiry import expire_due
from erpilot_approval.service_layer.withdrawals import withdraw_cancelled_run
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.refusals import InvalidMessage

from ..fakes import NOW
from .conftest import ASSERTION_KEY, refusal_of

pytestmark = pytest.mark.unit


def cancelled(session_id: str, *call_ids: str, owner: str = "alice", vouched_for: str | None = None,
              key: Ed25519PrivateKey = ASSERTION_KEY, at=NOW, **changes) -> RunCancelledV1:
    """The agent's record of a cancel, with the cancel command's assertion (for ``vouched_for``, the owner by
    default), as the gateway signed it at ``at``."""
    assertion = sign_assertion(key, sub=vouched_for or owner, roles=["requester"], session_id=session_id,
                               run_id="run-1", cancel=True, now=at)
    values = dict(session_id=session_id, run_id="run-1", owner=owner, cancelled_at=NOW, call_ids=list(call_ids),
                  assertion=assertion)
    return RunCancelledV1(**{**values, **changes})


async def test_a_cancelled_run_withdraws_the_owners_pending_approvals_of_its_calls(desk):
    waiting = await desk.request("submit_order", session_id="S-5", call_id="run-1:1")
    decided = await desk.request("submit_order", session_id="S-5", call_id="run-1:2")
    untouched = await desk.request("submit_order", session_id="S-5", call_id="run-1:3")
    someone_elses = await desk.request("submit_order", session_id="S-5", requested_by="eve", call_id="run-1:4")
    # the owner's approvals of another run and of a direct call, which the agent puts in the cancel's call ids
    # (security review of #32): the cancel's assertion vouches for run-1's withdrawal only
    other_run = await desk.request("submit_order", session_id="S-5", call_id="run-2:1")
    direct = await desk.request("submit_order", session_id="S-5", call_id="call-direct")
    await desk.decide(decided, "approve", "bob", "approver")
    desk.uow.advance(timedelta(seconds=3))

    await withdraw_cancelled_run(cancelled("S-5", waiting["call_id"], decided["call_id"], someone_elses["call_id"],
                                           other_run["call_id"], direct["call_id"]), desk.ports, stored_at=NOW)
    withdrawn = desk.approval(waiting["pending_id"])
    assert (withdrawn.status, withdrawn.decided_by, withdrawn.decided_at) == (
        "withdrawn", "alice", NOW + timedelta(seconds=3))
    assert desk.approval(decided["pending_id"]).status == "approved"  # its outcome stands
    assert desk.approval(untouched["pending_id"]).status == "pending"  # not a call of the run
    assert desk.approval(someone_elses["pending_id"]).status == "pending"  # not the owner's
    assert desk.approval(other_run["pending_id"]).status == "pending"  # not a call of the cancelled run
    assert desk.approval(direct["pending_id"]).status == "pending"
    resolved = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    assert [(e["pending_id"], e["status"], e["grant"]) for e in resolved][-1] == (
        waiting["pending_id"], "withdrawn", None)
    assert [(d.actor, d.action) for d in desk.state.decisions][-1] == ("alice", "withdraw")
    assert len(desk.events(subjects.ERP_CMD_COMMIT)) == 1  # the approved one's alone: nothing withdrawn commits

    await withdraw_cancelled_run(cancelled("S-5", waiting["call_id"]), desk.ports, stored_at=NOW)  # again
    assert desk.events(subjects.APPROVAL_EVT_RESOLVED) == resolved


async def test_a_pending_approval_past_its_deadline_expires_instead_of_being_withdrawn(desk):
    waiting = await desk.request("submit_order", session_id="S-6", call_id="run-1:1")
    desk.uow.advance(timedelta(minutes=15))

    await withdraw_cancelled_run(cancelled("S-6", waiting["call_id"], at=NOW + timedelta(minutes=15),
                                           cancelled_at=NOW + timedelta(minutes=15)), desk.ports,
                                 stored_at=NOW + timedelta(minutes=15))
    assert desk.approval(waiting["pending_id"]).status == "expired"


@pytest.mark.parametrize(("make", "reason"), [
    (lambda call: cancelled("S-7", call, assertion=None), "assertion_missing"),
    (lambda call: cancelled("S-7", call, key=Ed25519PrivateKey.generate()), "assertion_invalid"),
    # The agent names the session's owner, but the cancel was vouched for another person.
    (lambda call: cancelled("S-7", call, vouched_for="mallory"), "assertion_subject_mismatch"),
    (lambda call: cancelled("S-7", call).model_copy(update={"assertion": cancelled("S-other", call).assertion}),
     "assertion_session_mismatch"),
    # The assertion of the cancel of another run (issue #32: a cancel's assertion is bound to its run).
    (lambda call: cancelled("S-7", call, run_id="run-other"), "assertion_call_mismatch"),
    # The assertion had expired when the cancel was recorded (signed two hours before).
    (lambda call: cancelled("S-7", call, at=NOW - timedelta(hours=2)), "assertion_expired"),
    # An old assertion, and a cancelled_at the agent chose inside its lifetime: what counts is when the event
    # was stored (NOW), not what the agent writes (review of #26: else any stored assertion withdraws forever).
    (lambda call: cancelled("S-7", call, at=NOW - timedelta(days=30),
                            cancelled_at=NOW - timedelta(days=30) + timedelta(minutes=1)), "assertion_expired"),
])
async def test_a_cancel_the_gateway_did_not_vouch_for_withdraws_nothing(desk, make, reason):
    waiting = await desk.request("submit_order", session_id="S-7", call_id="run-1:1")
    commits = desk.uow.commits

    refused = await refusal_of(withdraw_cancelled_run(make(waiting["call_id"]), desk.ports, stored_at=NOW))
    assert isinstance(refused, InvalidMessage) and refused.details == {"reason": reason}
    assert desk.approval(waiting["pending_id"]).status == "pending" and desk.uow.commits == commits


async def test_the_sweep_expires_what_is_due_once_with_its_event(desk):
    due = await desk.request("cancel_order")
    desk.uow.advance(timedelta(minutes=10))
    later = await desk.request("cancel_order")
    desk.uow.advance(timedelta(minutes=5))  # the first one's deadline exactly

    assert await expire_due(desk.uow, batch=10) == 1
    assert (desk.approval(due["pending_id"]).status, desk.approval(later["pending_id"]).status) == (
        "expired", "pending")
    [event] = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    assert (event["pending_id"], event["status"], event["decided_by"]) == (due["pending_id"], "expired", None)
    assert [row.actor for row in desk.state.audit if row.kind == "expiry"] == ["system:expiry"]
    assert await expire_due(desk.uow, batch=10) == 0
    assert len(desk.events(subjects.APPROVAL_EVT_RESOLVED)) == 1
