"""Edits, withdrawals and the expiry sweep on the in-memory store: an edit supersedes the version it
replaces with one the ERP prepared, a withdrawal ends only the owner's pending approvals, and the sweep
expires what is due once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_approval.service_layer.edits import edit, edited_operation_id
from erpilot_approval.service_layer.expiry import expire_due
from erpilot_approval.service_layer.withdrawals import withdraw_approvals, withdraw_cancelled_run
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.approval.v1 import Actor, EditApprovalV1, WithdrawApprovalsV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.fingerprint import fingerprint

from .conftest import NOW

pytestmark = pytest.mark.unit

BOB = Actor(sub="bob", roles=["approver"])
NEW_ARGUMENTS = {"draft_id": "D-7", "revision": 3}


def edit_cmd(record: dict, who: Actor = BOB, arguments: dict | None = None) -> EditApprovalV1:
    return EditApprovalV1(pending_id=record["pending_id"], fingerprint=record["fingerprint"],
                          arguments=arguments or NEW_ARGUMENTS, actor=who)


async def test_an_edit_supersedes_the_old_version_with_one_the_erp_prepared(desk):
    record = await desk.request("submit_order")
    desk.store.advance(seconds=10)

    reply = await edit(edit_cmd(record), desk.ports)
    assert reply.ok and reply.data["status"] == "pending"
    new_fingerprint = fingerprint("submit_order", 1, NEW_ARGUMENTS)
    assert reply.data["operation_id"] == edited_operation_id(record["pending_id"], new_fingerprint)
    [asked] = desk.erp.prepares
    assert (asked.operation_id, asked.stock_check) == (reply.data["operation_id"], "exact")
    old, new = desk.approval(record["pending_id"]), desk.approval(reply.data["pending_id"])
    assert (old.status, old.superseded_by, old.decided_by) == ("superseded", new.pending_id, "bob")
    assert (new.supersedes, new.edited_by, new.editors) == (old.pending_id, "bob", ("bob",))
    assert new.preview["object"] == "Draft D-7" and "schema_version" not in new.preview  # the ERP's preview
    assert new.expires_at == NOW + timedelta(seconds=10, minutes=15)  # a deadline of its own
    assert [e["status"] for e in desk.events(subjects.APPROVAL_EVT_RESOLVED)] == ["superseded"]
    assert len(desk.events(subjects.APPROVAL_EVT_REQUESTED)) == 2


async def test_the_same_edit_again_answers_the_version_it_made(desk):
    record = await desk.request("submit_order")
    first = await edit(edit_cmd(record), desk.ports)

    again = await edit(edit_cmd(record), desk.ports)
    assert again.ok and again.data["pending_id"] == first.data["pending_id"]
    assert len(desk.state.approvals) == 2


async def test_an_edit_the_erp_refuses_changes_nothing(desk):
    record = await desk.request("submit_order")
    desk.erp.refusal = ReplyV1.failure("draft_changed", "the draft moved on", 422)

    reply = await edit(edit_cmd(record), desk.ports)
    assert not reply.ok and (reply.error.code, reply.error.status) == ("draft_changed", 422)
    assert desk.approval(record["pending_id"]).status == "pending" and len(desk.state.approvals) == 1


async def test_only_a_person_who_may_approve_may_edit(desk):
    record = await desk.request("submit_order")

    reply = await edit(edit_cmd(record, Actor(sub="dave", roles=["requester"])), desk.ports)
    assert not reply.ok and (reply.error.code, reply.error.status) == ("forbidden", 403)
    assert desk.erp.prepares == []


async def test_the_owner_withdraws_their_pending_approvals_and_nobody_elses(desk):
    mine = await desk.request("submit_order", session_id="S-9")
    other = await desk.request("submit_order", session_id="S-9", requested_by="eve")
    cmd = WithdrawApprovalsV1(session_id="S-9", pending_ids=[mine["pending_id"], other["pending_id"], "pa-nope"],
                              actor=Actor(sub="alice", roles=["requester"]))

    reply = await withdraw_approvals(cmd, desk.ports)
    assert reply.ok and {i["pending_id"]: i["status"] for i in reply.data["items"]} == {
        mine["pending_id"]: "withdrawn", other["pending_id"]: "not_found", "pa-nope": "not_found"}
    assert desk.approval(other["pending_id"]).status == "pending"
    assert [e["status"] for e in desk.events(subjects.APPROVAL_EVT_RESOLVED)] == ["withdrawn"]

    assert await withdraw_approvals(cmd, desk.ports) == reply  # a second withdrawal changes nothing
    assert len(desk.events(subjects.APPROVAL_EVT_RESOLVED)) == 1


async def test_a_cancelled_run_withdraws_the_owners_pending_approvals_of_its_calls(desk):
    waiting = await desk.request("submit_order", session_id="S-5")
    decided = await desk.request("submit_order", session_id="S-5")
    untouched = await desk.request("submit_order", session_id="S-5")
    await desk.decide(decided, "approve", "bob", "approver")

    cancelled = RunCancelledV1(session_id="S-5", run_id="run-1", owner="alice", cancelled_at=NOW,
                               call_ids=[waiting["call_id"], decided["call_id"]])

    await withdraw_cancelled_run(cancelled, desk.ports)
    assert desk.approval(waiting["pending_id"]).status == "withdrawn"
    assert desk.approval(decided["pending_id"]).status == "approved"  # its outcome stands
    assert desk.approval(untouched["pending_id"]).status == "pending"


async def test_the_sweep_expires_what_is_due_once_with_its_event(desk):
    due = await desk.request("cancel_order")
    desk.store.advance(minutes=10)
    later = await desk.request("cancel_order")
    desk.store.advance(minutes=5)  # the first one's deadline exactly

    assert await expire_due(desk.store, batch=10) == 1
    assert (desk.approval(due["pending_id"]).status, desk.approval(later["pending_id"]).status) == (
        "expired", "pending")
    [event] = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    assert (event["pending_id"], event["status"], event["decided_by"]) == (due["pending_id"], "expired", None)
    assert [row.actor for row in desk.state.audit if row.kind == "expiry"] == ["system:expiry"]
    assert await expire_due(desk.store, batch=10) == 0
    assert len(desk.events(subjects.APPROVAL_EVT_RESOLVED)) == 1
