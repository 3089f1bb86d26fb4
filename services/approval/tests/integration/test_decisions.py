"""Requests and decisions over NATS: idempotency, one winner among concurrent deciders, roles, SoD."""

from __future__ import annotations

import asyncio

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1, ListApprovalsV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_platform.grants import verify_grant

from .conftest import VERIFY_KEY, actor, at, later_marker, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]


async def test_request_is_idempotent_by_operation_id_and_announced(approvals, events) -> None:
    cmd = approvals.prepared_cmd("submit_order")
    first = await approvals.send(subjects.APPROVAL_CMD_REQUEST, cmd)
    again = await approvals.send(subjects.APPROVAL_CMD_REQUEST, cmd)
    assert first.ok and again.ok and first.data == again.data
    record = first.data
    assert (record["status"], record["required_roles"], record["stock_check"]) == (
        "pending", ["approver", "manager"], "exact")
    assert record["policy_version"].startswith("sha256:")
    assert (at(record["expires_at"]) - at(record["created_at"])).total_seconds() == 15 * 60

    await events.wait(lambda: events.of(record["pending_id"], "requested"))
    await later_marker(approvals, events)
    assert len(events.of(record["pending_id"], "requested")) == 1  # the repeat emitted nothing

    arguments = {"draft_id": "D-1", "revision": 9}
    other = cmd.model_copy(update={"arguments": arguments, "fingerprint": fingerprint("submit_order", 1, arguments)})
    conflict = await approvals.send(subjects.APPROVAL_CMD_REQUEST, other)  # not what the ledger prepared
    assert (conflict.ok, conflict.error.code, conflict.error.status) == (False, "invalid_request", 422)
    approvals.ledger.record(other)  # even a ledger that agrees cannot reuse the operation for another request
    conflict = await approvals.send(subjects.APPROVAL_CMD_REQUEST, other)
    assert (conflict.ok, conflict.error.code, conflict.error.status) == (False, "idempotency_conflict", 409)


@pytest.mark.parametrize(("ledger", "request_changes"), [
    ({"preview": {"operation": "Submit order", "object": "Draft D-1 revision 1", "target": "Big Customer",
                  "amount_minor": 5_000_000, "currency": "EUR"}}, {}),  # the agent lowered the amount
    ({}, {"preview": {"operation": "submit_order", "object": "x", "target": "a friend", "amount_minor": 12_345,
                      "currency": "EUR"}}),  # a made-up preview
    ({"arguments": {"draft_id": "D-1", "revision": 2},
      "fingerprint": fingerprint("submit_order", 1, {"draft_id": "D-1", "revision": 2})}, {}),
    ({"requested_by": "mallory"}, {}),
    ({"status": "committed"}, {}),
    (None, {}),  # never prepared
])
async def test_a_request_unlike_the_ledgers_prepared_operation_is_refused(approvals, events, ledger,
                                                                          request_changes) -> None:
    cmd = approvals.request_cmd("submit_order", amount_minor=12_345).model_copy(update=request_changes)
    if ledger is not None:
        approvals.ledger.record(cmd, **{"preview": approvals.request_cmd().preview, **ledger})
    reply = await approvals.send(subjects.APPROVAL_CMD_REQUEST, cmd)
    assert (reply.ok, reply.error.code, reply.error.status) == (False, "invalid_request", 422)
    listed = await approvals.send(subjects.APPROVAL_QUERY_LIST, ListApprovalsV1(
        actor=actor("boss", "approver", "manager"), session_id=cmd.session_id, status=None), durable=False)
    assert listed.data["items"] == []  # nothing stored
    await later_marker(approvals, events)  # a wrong event of the refused request would be in by now
    assert not [body for _, _, body in events.items if body.get("record", {}).get("session_id") == cmd.session_id]


async def test_the_approval_shows_the_ledgers_preview_and_applies_its_amount(approvals) -> None:
    big = {"operation": "Submit order", "object": "Draft D-1 revision 1", "target": "Big Customer",
           "amount_minor": 5_000_000, "currency": "EUR", "effects": [], "notes": [], "details": {}}
    record = await approvals.create("submit_order", preview=big)
    assert (record["preview"], record["required_roles"], record["risk"]) == (big, ["manager"], "high")


@pytest.mark.parametrize(("changes", "code", "status"), [
    ({"arguments": {"draft_id": "D-1", "revision": "1"}}, "invalid_arguments", 422),
    ({"fingerprint": "sha256:" + "0" * 64}, "invalid_request", 422),
    ({"tool": "search_products", "arguments": {"query": ""}}, "approval_not_required", 409),
    ({"tool": "no_such_tool", "arguments": {}}, "unknown_tool", 422),
])
async def test_bad_requests_are_refused_and_store_nothing(approvals, changes, code, status) -> None:
    cmd = approvals.request_cmd("submit_order")
    bad = cmd.model_copy(update=changes)
    if "fingerprint" not in changes:  # a correct fingerprint, so the check under test is the one that fails
        bad = bad.model_copy(update={"fingerprint": fingerprint(bad.tool, 1, bad.arguments)})
    approvals.ledger.record(bad)  # even with a ledger that agrees, the check under test refuses it
    reply = await approvals.send(subjects.APPROVAL_CMD_REQUEST, bad)
    assert (reply.ok, reply.error.code, reply.error.status) == (False, code, status)
    approvals.ledger.record(cmd)
    fixed = await approvals.send(subjects.APPROVAL_CMD_REQUEST, cmd)
    assert fixed.ok  # the operation id was not used up by the refused request


async def test_eight_concurrent_deciders_exactly_one_wins(approvals, events) -> None:
    record = await approvals.create("submit_order")
    people = [actor(f"approver-{i}", "approver") for i in range(8)]
    actions = ["approve", "reject"] * 4
    replies = await asyncio.gather(*(approvals.decide(record, action, who) for action, who in zip(
        actions, people, strict=True)))

    winners = [(reply, action, who) for reply, action, who in zip(replies, actions, people, strict=True) if reply.ok]
    assert len(winners) == 1, [r.error and r.error.code for r in replies]
    assert {r.error.code for r in replies if not r.ok} == {"already_decided"}
    assert {r.error.status for r in replies if not r.ok} == {409}
    won, action, who = winners[0]
    assert (won.data["status"], won.data["decided_by"]) == ({"approve": "approved", "reject": "rejected"}[action],
                                                             who.sub)

    resolved = await events.wait(lambda: events.of(record["pending_id"]))
    repeat = await approvals.decide(record, action, who)  # the winner repeating: the recorded result
    assert repeat.ok and repeat.data == won.data
    other_action = "reject" if action == "approve" else "approve"
    assert (await approvals.decide(record, other_action, who)).error.code == "already_decided"
    await later_marker(approvals, events)
    assert len(events.of(record["pending_id"])) == 1
    body = resolved[0][1]
    if action == "approve":
        grant = GrantV1.model_validate(body["grant"])
        assert verify_grant(grant, VERIFY_KEY)
        assert (grant.operation_id, grant.fingerprint, grant.decided_by) == (
            record["operation_id"], record["fingerprint"], who.sub)
        assert (grant.stock_check, grant.decided_at) == ("exact", at(won.data["decided_at"]))
    else:
        assert body["grant"] is None


async def test_one_person_pressing_approve_eight_times_at_once_decides_once(approvals, events) -> None:
    record = await approvals.create("submit_order")
    bob = actor("bob", "approver")
    replies = await asyncio.gather(*(approvals.decide(record, "approve", bob) for _ in range(8)))
    assert all(reply.ok for reply in replies)
    assert len({(r.data["status"], r.data["decided_by"], r.data["decided_at"]) for r in replies}) == 1
    await events.wait(lambda: events.of(record["pending_id"]))
    await later_marker(approvals, events)
    assert len(events.of(record["pending_id"])) == 1


async def test_a_poison_message_is_answered_and_blocks_nothing(approvals, broker) -> None:
    for body in (b"{not json", b'{"pending_id": "x", "action": "approve"}', b'{"action": true}'):
        response = await broker.request(body, subjects.APPROVAL_CMD_DECIDE, stream="ERPILOT_COMMANDS", timeout=10)
        reply = ReplyV1.model_validate_json(response.body)
        assert (reply.ok, reply.error.code, reply.error.status) == (False, "invalid_message", 422)
    record = await approvals.create("submit_order")
    assert (await approvals.decide(record, "approve", actor("bob", "approver"))).ok


async def test_rejection_comment_travels_and_stale_fingerprint_is_refused(approvals, events) -> None:
    record = await approvals.create("cancel_order")
    bob = actor("bob", "approver")
    stale = await approvals.decide(record, "approve", bob, fingerprint="sha256:" + "1" * 64)
    assert (stale.error.code, stale.error.status) == ("stale_fingerprint", 409)
    reply = await approvals.decide(record, "reject", bob, comment="wrong customer")
    assert reply.ok and reply.data["comment"] == "wrong customer"
    (_, body), = await events.wait(lambda: events.of(record["pending_id"]))
    assert (body["status"], body["comment"], body["grant"]) == ("rejected", "wrong customer", None)
    missing = await approvals.decide({**record, "pending_id": uid("pa_")}, "approve", bob)
    assert (missing.error.code, missing.error.status) == ("not_found", 404)


async def test_roles_and_separation_of_duties(approvals) -> None:
    stock = await approvals.create("adjust_stock")  # manager only
    refused = await approvals.decide(stock, "approve", actor("bob", "approver", "requester", "admin"))
    assert (refused.error.code, refused.error.status) == ("forbidden", 403)

    refund = await approvals.create("refund_payment", requested_by="alice")  # manager, SoD
    own = await approvals.decide(refund, "approve", actor("alice", "manager"))
    assert (own.error.code, own.error.status) == ("separation_of_duties", 403)
    assert (await approvals.decide(refund, "approve", actor("carol", "manager"))).data["status"] == "approved"

    big = await approvals.create("submit_order", amount_minor=1_000_000)  # the amount rule: manager only
    assert big["required_roles"] == ["manager"]
    assert (await approvals.decide(big, "approve", actor("bob", "approver"))).error.code == "forbidden"


async def test_get_and_list_show_only_what_the_person_may_see(approvals) -> None:
    session_id = uid("ses-")
    order = await approvals.create("submit_order", session_id=session_id, requested_by="alice")
    stock = await approvals.create("adjust_stock", session_id=session_id, requested_by="alice")

    for who in (actor("alice", "requester"), actor("bob", "approver"), actor("ada", "admin")):
        assert (await approvals.get(order["pending_id"], who)).data["pending_id"] == order["pending_id"]
    hidden = await approvals.get(stock["pending_id"], actor("bob", "approver"))
    assert (hidden.error.code, hidden.error.status) == ("not_found", 404)

    async def listed(who, **filters) -> list[str]:
        reply = await approvals.send(subjects.APPROVAL_QUERY_LIST, ListApprovalsV1(actor=who, **filters),
                                     durable=False)
        return [item["pending_id"] for item in reply.data["items"]]

    assert await listed(actor("bob", "approver"), session_id=session_id) == [order["pending_id"]]
    both = await listed(actor("carol", "approver", "manager"), session_id=session_id)
    assert both == [stock["pending_id"], order["pending_id"]]  # newest first, no duplicates
    assert await listed(actor("alice", "requester"), session_id=session_id) == []
    await approvals.decide(order, "approve", actor("bob", "approver"))
    assert await listed(actor("bob", "approver"), session_id=session_id) == []
    assert await listed(actor("bob", "approver"), session_id=session_id, status="approved") == [order["pending_id"]]
    assert len(await listed(actor("carol", "approver", "manager"), limit=1)) == 1
