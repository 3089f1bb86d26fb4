"""Edits: a new pending version (new pending_id, operation_id, fingerprint, preview, ttl) supersedes the old. The
ledger prepares it: the approval service records the edit's intent, asks ``cmd.erp.prepare`` with ``supersedes``,
and the ERP's ``cmd.approval.request`` (with ``supersedes``) makes the version, accepted against that intent."""

from __future__ import annotations

import asyncio

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.fingerprint import fingerprint

from .conftest import actor, at, later_marker, signed, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service", "fake_erp")]
BOB = actor("bob", "approver")


async def test_an_edit_creates_a_new_version_and_supersedes_the_old_one(approvals, events, fake_erp) -> None:
    old = await approvals.create("submit_order", arguments={"draft_id": "D-1", "revision": 1})
    await asyncio.sleep(0.01)
    reply = await approvals.edit(old, {"draft_id": "D-1", "revision": 2}, BOB)
    assert reply.ok, reply
    new = reply.data
    assert (new["status"], new["supersedes"], new["call_id"], new["session_id"], new["requested_by"]) == (
        "pending", old["pending_id"], old["call_id"], old["session_id"], old["requested_by"])
    assert new["arguments"] == {"draft_id": "D-1", "revision": 2}
    assert new["fingerprint"] == fingerprint("submit_order", 1, new["arguments"]) != old["fingerprint"]
    assert new["pending_id"] != old["pending_id"] and new["operation_id"] != old["operation_id"]
    assert new["preview"]["amount_minor"] == 200  # the ERP's fresh preview
    assert at(new["expires_at"]) > at(old["expires_at"])  # a fresh ttl
    prepared = fake_erp[-1]
    assert (prepared.operation_id, prepared.fingerprint, prepared.requested_by, prepared.stock_check) == (
        new["operation_id"], new["fingerprint"], old["requested_by"], "exact")
    assert (prepared.supersedes, prepared.edited_by, prepared.assertion) == (old["operation_id"], "bob", None)

    ended = (await approvals.get(old["pending_id"], BOB)).data
    assert (ended["status"], ended["superseded_by"], ended["decided_by"]) == ("superseded", new["pending_id"], "bob")

    await events.wait(lambda: events.of(new["pending_id"], "requested"))
    mine = [(subject, body) for _, subject, body in events.items
            if old["pending_id"] in (body.get("pending_id"), body.get("record", {}).get("pending_id"),
                                     body.get("record", {}).get("supersedes"))]
    assert [(subject, body.get("status")) for subject, body in mine] == [  # in this order
        (subjects.APPROVAL_EVT_REQUESTED, None), (subjects.APPROVAL_EVT_RESOLVED, "superseded"),
        (subjects.APPROVAL_EVT_REQUESTED, None)]
    assert mine[1][1]["superseded_by"] == new["pending_id"]
    assert mine[2][1]["record"]["pending_id"] == new["pending_id"]

    # The same person repeating the same edit gets the version already made; anything else is refused.
    assert (await approvals.edit(old, {"draft_id": "D-1", "revision": 2}, BOB)).data == new
    other = await approvals.edit(old, {"draft_id": "D-1", "revision": 3}, BOB)
    assert (other.error.code, other.error.status) == ("superseded", 409)
    late = await approvals.edit(old, {"draft_id": "D-1", "revision": 2}, actor("eve", "approver"))
    assert late.error.code == "superseded"
    assert (await approvals.decide(old, "approve", BOB)).error.code == "superseded"

    approved = await approvals.decide(new, "approve", actor("carol", "manager"))
    assert approved.ok and approved.data["status"] == "approved"
    (_, body), = await events.wait(lambda: events.of(new["pending_id"]))
    grant = GrantV1.model_validate(body["grant"])
    assert (grant.operation_id, grant.fingerprint, grant.stock_check) == (
        new["operation_id"], new["fingerprint"], "exact")
    await events.wait(lambda: events.commits_of(new["operation_id"]))
    assert events.commits_of(old["operation_id"]) == []  # the superseded version never commits


async def test_an_approver_who_edits_a_cancellation_may_not_approve_it_alone(approvals) -> None:
    # Issue 26, as it was confirmed live: an approver edited a pending cancel_order to another order and
    # approved it alone.
    old = await approvals.create("cancel_order", arguments={"order_id": "O-1"})
    edited = await approvals.edit(old, {"order_id": "O-2"}, BOB)
    assert edited.ok, edited
    alone = await approvals.decide(edited.data, "approve", BOB)
    assert (alone.error.code, alone.error.status) == ("separation_of_duties", 403)
    assert (await approvals.decide(edited.data, "approve", actor("carol", "approver"))).data["status"] == "approved"


async def test_a_superseding_request_nobody_here_asked_for_is_dead_lettered(approvals, events) -> None:
    # A compromised agent sends cmd.erp.prepare with `supersedes` itself; the ERP's request comes back here.
    old = await approvals.create("submit_order", arguments={"draft_id": "D-1", "revision": 1})
    arguments = {"draft_id": "D-1", "revision": 5}
    original = approvals.ledger.operations[old["operation_id"]]
    forged = signed(original.model_copy(update={  # the ledger signs what it prepared, `supersedes` included
        "arguments": arguments, "fingerprint": fingerprint("submit_order", 1, arguments), "operation_id": uid("op-"),
        "supersedes": old["operation_id"]}))

    reply = await approvals.send(subjects.APPROVAL_CMD_REQUEST, forged)
    assert (reply.error.code, reply.error.details) == ("invalid_message", {"reason": "edit_not_requested"})
    assert (await approvals.get(old["pending_id"], BOB)).data["status"] == "pending"
    await later_marker(approvals, events)
    assert not events.of(old["pending_id"])


async def test_edits_that_must_fail_change_nothing(approvals, events) -> None:
    old = await approvals.create("submit_order")
    invalid = await approvals.edit(old, {"draft_id": "D-1", "revision": "2"}, BOB)
    assert (invalid.error.code, invalid.error.status) == ("invalid_arguments", 422)
    assert invalid.error.details["errors"][0]["loc"] == ["revision"]
    unknown_field = await approvals.edit(old, {"draft_id": "D-1", "revision": 2, "qty": 1}, BOB)
    assert unknown_field.error.code == "invalid_arguments"
    rejected = await approvals.edit(old, {"draft_id": "D-GONE", "revision": 2}, BOB)
    assert (rejected.error.code, rejected.error.status) == ("draft_changed", 409)
    stale = await approvals.edit(old, {"draft_id": "D-1", "revision": 2}, BOB, fingerprint="sha256:" + "2" * 64)
    assert (stale.error.code, stale.error.status) == ("stale_fingerprint", 409)
    forbidden = await approvals.edit(old, {"draft_id": "D-1", "revision": 2}, actor("rita", "requester"))
    assert (forbidden.error.code, forbidden.error.status) == ("forbidden", 403)

    assert (await approvals.get(old["pending_id"], BOB)).data["status"] == "pending"
    await later_marker(approvals, events)
    assert not events.of(old["pending_id"])


async def test_no_one_who_shaped_a_version_may_approve_it_under_separation_of_duties(approvals, events) -> None:
    # refund_payment: manager, with separation of duties (the default policy).
    manager_a, manager_c = actor("manager-a", "manager"), actor("manager-c", "manager")
    first = await approvals.create("refund_payment", requested_by="bob")
    assert first["edited_by"] is None

    raised = {"order_id": "O-1", "amount_minor": 90_000, "currency": "EUR", "channel": "original"}
    reply = await approvals.edit(first, raised, manager_a)
    assert reply.ok, reply
    second = reply.data
    assert (second["requested_by"], second["edited_by"]) == ("bob", "manager-a")
    (_, announced), = await events.wait(lambda: events.of(second["pending_id"], "requested"))
    assert announced["record"]["edited_by"] == "manager-a"

    refused = await approvals.decide(second, "approve", manager_a)
    assert (refused.error.code, refused.error.status) == ("separation_of_duties", 403)
    assert (await approvals.decide(second, "approve", actor("bob", "manager"))).error.code == "separation_of_duties"
    assert (await approvals.get(second["pending_id"], manager_c)).data["status"] == "pending"

    # Another edit keeps every earlier editor a party: manager A still may not approve the third version.
    third = (await approvals.edit(second, {**raised, "amount_minor": 80_000}, manager_c)).data
    assert third["edited_by"] == "manager-c"
    assert (await approvals.decide(third, "approve", manager_a)).error.code == "separation_of_duties"
    assert (await approvals.decide(third, "approve", manager_c)).error.code == "separation_of_duties"
    approved = await approvals.decide(third, "approve", actor("manager-d", "manager"))
    assert approved.ok and (approved.data["status"], approved.data["decided_by"]) == ("approved", "manager-d")


async def test_a_party_may_still_reject_an_edited_version(approvals) -> None:
    first = await approvals.create("refund_payment", requested_by="bob")
    second = (await approvals.edit(first, {**first["arguments"], "amount_minor": 700}, actor("ann", "manager"))).data
    rejected = await approvals.decide(second, "reject", actor("ann", "manager"), comment="changed my mind")
    assert rejected.ok and rejected.data["status"] == "rejected"
