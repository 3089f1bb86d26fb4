"""Edits on the memory unit of work, through the ledger: the edit records its intent, the (fake) ERP prepares the
edited operation and sends its request back with ``supersedes``, and that request, accepted only against the
intent, replaces the old version; the edit answers the new version (or why there is none)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from erpilot_approval.domain.edits import edited_operation_id
from erpilot_approval.domain.policy import load_policy
from erpilot_approval.service_layer import edits
from erpilot_approval.service_layer.edits import edit
from erpilot_approval.service_layer.requests import request_approval
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import Actor, EditApprovalV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_platform.broker import TransientError
from erpilot_platform.grants import verify_edit
from erpilot_platform.refusals import InvalidMessage

from ..fakes import NOW
from .conftest import SIGNING_KEY, Desk, refusal_of, signed

pytestmark = pytest.mark.unit

BOB = Actor(sub="bob", roles=["approver"])
NEW_ARGUMENTS = {"draft_id": "D-7", "revision": 3}
NEW_FINGERPRINT = fingerprint("submit_order", 1, NEW_ARGUMENTS)


def edit_cmd(record: dict, who: Actor = BOB, arguments: dict | None = None) -> EditApprovalV1:
    return EditApprovalV1(pending_id=record["pending_id"], fingerprint=record["fingerprint"],
                          arguments=arguments or NEW_ARGUMENTS, actor=who)


async def until_prepared(desk: Desk, count: int = 1) -> None:
    """Let a running edit reach the ERP (its intent is committed by then)."""
    for _ in range(1000):  # a few event-loop turns; the memory unit of work never waits on anything else
        if len(desk.erp.prepares) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError("the edit never asked the ERP")


async def test_an_edit_asks_the_ledger_and_its_request_supersedes_the_old_version(desk):
    record = await desk.request("submit_order")
    desk.uow.advance(timedelta(seconds=10))

    new = await edit(edit_cmd(record), desk.ports)
    assert new.status == "pending" and new.operation_id == edited_operation_id(record["pending_id"], NEW_FINGERPRINT)
    [asked] = desk.erp.prepares
    assert (asked.operation_id, asked.supersedes, asked.edited_by, asked.requested_by, asked.assertion,
            asked.stock_check) == (new.operation_id, record["operation_id"], "bob", "alice", None, "exact")
    assert verify_edit(asked, SIGNING_KEY.public_key())  # the ERP takes `supersedes` from this service only (#32)
    old, stored = desk.approval(record["pending_id"]), desk.approval(new.pending_id)
    assert (old.status, old.superseded_by, old.decided_by) == ("superseded", new.pending_id, "bob")
    assert (stored.supersedes, stored.edited_by, stored.editors, stored.requested_by) == (
        old.pending_id, "bob", ("bob",), "alice")
    assert stored.preview["object"] == "Draft D-7"  # the ledger's preview of the edited operation
    assert stored.expires_at == NOW + timedelta(seconds=10, minutes=15)  # a deadline of its own
    assert [(sent.subject, sent.payload.get("status")) for sent in desk.uow.sent][-2:] == [
        (subjects.APPROVAL_EVT_RESOLVED, "superseded"), (subjects.APPROVAL_EVT_REQUESTED, None)]
    assert [(d.actor, d.action) for d in desk.state.decisions] == [("bob", "edit")]
    intent = desk.state.edits[new.operation_id]
    assert (intent.pending_id, intent.editor, intent.fingerprint, intent.refusal) == (
        record["pending_id"], "bob", NEW_FINGERPRINT, None)


async def test_the_same_edit_again_answers_the_version_it_made_and_asks_nothing(desk):
    record = await desk.request("submit_order")
    first = await edit(edit_cmd(record), desk.ports)

    again = await edit(edit_cmd(record), desk.ports)
    assert again.pending_id == first.pending_id and len(desk.state.approvals) == 2
    assert len(desk.erp.prepares) == 1
    other = await refusal_of(edit(edit_cmd(record, Actor(sub="eve", roles=["approver"])), desk.ports))
    assert other.code == "superseded"


async def test_an_edit_the_erp_refuses_changes_nothing_and_leaves_no_intent(desk):
    record = await desk.request("submit_order")
    desk.erp.refusal = ReplyV1.failure("draft_changed", "the draft moved on", 422)

    refused = await refusal_of(edit(edit_cmd(record), desk.ports))
    assert (refused.code, refused.status) == ("draft_changed", 422)
    assert desk.approval(record["pending_id"]).status == "pending" and len(desk.state.approvals) == 1
    assert desk.state.edits == {}  # no request will come for it: a later edit starts afresh

    desk.erp.refusal = None
    assert (await edit(edit_cmd(record), desk.ports)).supersedes == record["pending_id"]


async def test_only_a_person_who_may_approve_may_edit(desk):
    record = await desk.request("submit_order")

    refused = await refusal_of(edit(edit_cmd(record, Actor(sub="dave", roles=["requester"])), desk.ports))
    assert (refused.code, refused.status) == ("forbidden", 403)
    assert desk.erp.prepares == [] and desk.state.edits == {}


async def test_an_approver_who_edits_a_cancellation_may_not_approve_it_alone(desk):
    # Issue 26: an approver edited a pending cancel_order to another order and approved it alone.
    record = await desk.request("cancel_order")
    desk.erp.record(desk.erp.records[record["operation_id"]])
    edited = await edit(edit_cmd(record, arguments={"order_id": "O-2"}), desk.ports)

    refused = await refusal_of(desk.decide(edited.model_dump(mode="json"), "approve", "bob", "approver"))
    assert (refused.code, refused.status) == ("separation_of_duties", 403)
    approved = await desk.decide(edited.model_dump(mode="json"), "approve", "carol", "approver")
    assert approved.status == "approved"


async def test_a_request_superseding_an_operation_without_an_intent_is_an_invalid_message(desk):
    # What a compromised agent gets by sending cmd.erp.prepare with `supersedes` itself: the ERP's request
    # (signed: the ledger did prepare it) comes back, and nothing here asked for it.
    record = await desk.request("submit_order")
    original = desk.erp.records[record["operation_id"]]
    forged = signed(original.model_copy(update={
        "arguments": NEW_ARGUMENTS, "fingerprint": NEW_FINGERPRINT, "supersedes": record["operation_id"],
        "operation_id": edited_operation_id(record["pending_id"], NEW_FINGERPRINT)}))
    sent = list(desk.uow.sent)

    refused = await refusal_of(request_approval(forged, desk.ports))
    assert isinstance(refused, InvalidMessage) and refused.details == {"reason": "edit_not_requested"}
    assert desk.approval(record["pending_id"]).status == "pending" and len(desk.state.approvals) == 1
    assert desk.uow.sent == sent


@pytest.mark.parametrize(("change", "reason"), [
    ({"arguments": {"draft_id": "D-8", "revision": 3},
      "fingerprint": fingerprint("submit_order", 1, {"draft_id": "D-8", "revision": 3})}, "edit_not_requested"),
    ({"supersedes": "op-elsewhere"}, "edit_not_requested"),
    # another call (or another requester) fails earlier: the assertion is the old call's, for the old requester
    ({"call_id": "call-elsewhere"}, "assertion_call_mismatch"),
])
async def test_a_request_unlike_the_recorded_intent_is_an_invalid_message(desk, change, reason):
    record = await desk.request("submit_order")
    desk.erp.hold = True
    editing = asyncio.create_task(edit(edit_cmd(record), desk.ports))
    await until_prepared(desk)
    [request] = desk.erp.outbox

    # The ledger's (signed) request for a prepare the agent sent with `supersedes`, unlike the intent.
    refused = await refusal_of(request_approval(signed(request.model_copy(update=change)), desk.ports))
    assert refused.details == {"reason": reason}
    assert desk.approval(record["pending_id"]).status == "pending"
    await desk.erp.relay()  # the ledger's own request still makes the version
    assert (await editing).supersedes == record["pending_id"]


async def test_when_the_old_version_is_decided_before_the_ledger_answers_the_edit_is_refused(desk):
    record = await desk.request("submit_order")
    desk.erp.hold = True
    editing = asyncio.create_task(edit(edit_cmd(record), desk.ports))
    await until_prepared(desk)
    await desk.decide(record, "approve", "carol", "manager")  # the decision takes the row first

    await desk.erp.relay()
    refused = await refusal_of(editing)
    assert (refused.code, refused.status) == ("already_decided", 409)
    assert desk.approval(record["pending_id"]).status == "approved" and len(desk.state.approvals) == 1
    [intent] = desk.state.edits.values()
    assert intent.refusal["code"] == "already_decided"
    await desk.erp.relay()  # a redelivered request answers the same, and changes nothing
    assert len(desk.state.approvals) == 1 and desk.events(subjects.APPROVAL_EVT_REQUESTED)[-1]["record"][
        "pending_id"] == record["pending_id"]


async def test_when_the_old_version_expires_before_the_ledger_answers_it_expires_with_its_event(desk):
    record = await desk.request("submit_order")
    desk.erp.hold = True
    editing = asyncio.create_task(edit(edit_cmd(record), desk.ports))
    await until_prepared(desk)
    desk.uow.advance(timedelta(minutes=15))

    await desk.erp.relay()
    assert (await refusal_of(editing)).code == "expired"
    assert desk.approval(record["pending_id"]).status == "expired"
    assert [e["status"] for e in desk.events(subjects.APPROVAL_EVT_RESOLVED)] == ["expired"]


async def test_when_the_policy_in_force_refuses_the_new_version_the_old_one_stays(desk):
    record = await desk.request("submit_order")
    desk.erp.hold = True
    editing = asyncio.create_task(edit(edit_cmd(record), desk.ports))
    await until_prepared(desk)
    desk.ports = replace(desk.ports, policy=load_policy("[tools.submit_order]\naction = 'deny'\n"))  # a restart

    await desk.erp.relay()
    assert (await refusal_of(editing)).code == "policy_denied"
    assert desk.approval(record["pending_id"]).status == "pending"
    assert desk.events(subjects.APPROVAL_EVT_REQUEST_REFUSED) == []  # the call still waits for the old version


async def test_an_edit_whose_request_does_not_come_is_retried(desk, monkeypatch):
    record = await desk.request("submit_order")
    desk.erp.hold = True
    monkeypatch.setattr(edits, "WAIT_SECONDS", 0.05)

    with pytest.raises(TransientError):  # the ServiceBus retries the command later
        await edit(edit_cmd(record), desk.ports)
    await desk.erp.relay()  # the ledger's request arrives meanwhile
    again = await edit(edit_cmd(record), desk.ports)  # the redelivered command
    assert again.supersedes == record["pending_id"] and len(desk.erp.prepares) == 1


async def test_a_crash_after_the_intent_leaves_it_recorded_and_the_redelivered_edit_completes(desk, monkeypatch):
    record = await desk.request("submit_order")

    def crash(name: str) -> None:
        if name == "approval.edit.after_intent":
            raise SystemExit(137)

    monkeypatch.setattr(edits, "failpoint", crash)
    with pytest.raises(SystemExit):
        await edit(edit_cmd(record), desk.ports)
    assert list(desk.state.edits) == [edited_operation_id(record["pending_id"], NEW_FINGERPRINT)]
    assert desk.erp.prepares == [] and desk.approval(record["pending_id"]).status == "pending"
    refused = await refusal_of(edit(edit_cmd(record, Actor(sub="eve", roles=["approver"])), desk.ports))
    assert refused.code == "superseded"  # another person's same edit waits for this one

    monkeypatch.setattr(edits, "failpoint", lambda name: None)
    new = await edit(edit_cmd(record), desk.ports)  # JetStream redelivers the unacknowledged command
    assert new.supersedes == record["pending_id"] and len(desk.erp.prepares) == 1
    assert desk.approval(record["pending_id"]).status == "superseded"
