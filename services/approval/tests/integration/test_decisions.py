"""Requests and decisions over NATS: idempotency, one winner among concurrent deciders, roles, SoD."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.js.errors import NotFoundError

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1, ListApprovalsV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.subjects import DEAD_LETTER_STREAM, dead_letter_subject
from erpilot_platform.grants import verify_grant

from .conftest import VERIFY_KEY, actor, at, later_marker, signed, uid, vouch

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]


async def test_request_is_idempotent_by_operation_id_and_announced(approvals, events) -> None:
    cmd = approvals.request_cmd("submit_order")
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
    other = vouch(cmd.model_copy(update={"arguments": arguments,
                                         "fingerprint": fingerprint("submit_order", 1, arguments)}))
    conflict = await approvals.send(subjects.APPROVAL_CMD_REQUEST, other)
    assert (conflict.ok, conflict.error.code, conflict.error.status) == (False, "idempotency_conflict", 409)


FORGED = Ed25519PrivateKey.generate()


def invented_preview(cmd):
    """A compromised agent's version of the ledger's request: the same operation, a preview of its own."""
    return cmd.model_copy(update={"preview": cmd.preview.model_copy(update={"amount_minor": 1,
                                                                            "target": "A trusted customer"})})


@pytest.mark.parametrize(("forge", "reason"), [
    # Not the ledger's: on a development stack anyone may publish the subject (issue 25).
    (lambda cmd: invented_preview(cmd).model_copy(update={"ledger_signature": None}), "ledger_signature_missing"),
    (invented_preview, "ledger_signature_invalid"),  # the ledger's signature, another preview
    (lambda cmd: signed(invented_preview(cmd), key=FORGED), "ledger_signature_invalid"),
    # Signed by the ledger, but without the gateway's word for the requester.
    (lambda cmd: signed(cmd.model_copy(update={"assertion": None})), "assertion_missing"),
    (lambda cmd: vouch(cmd, key=FORGED), "assertion_invalid"),
    # Issue 25's forgery: a real operation of Alice's session, requested "by" someone the gateway never named.
    (lambda cmd: signed(vouch(cmd).model_copy(update={"requested_by": "victim"})), "assertion_subject_mismatch"),
    (lambda cmd: vouch(cmd, session_id=uid("ses-")), "assertion_session_mismatch"),
    (lambda cmd: signed(vouch(cmd, at=datetime.now(UTC) - timedelta(hours=2)).model_copy(
        update={"asserted_at": datetime.now(UTC)})), "assertion_expired"),
])
async def test_a_request_without_the_ledgers_signature_or_the_gateways_word_is_dead_lettered_and_stores_nothing(
        approvals, events, broker, forge, reason) -> None:
    cmd = forge(approvals.request_cmd("submit_order", requested_by="alice"))
    reply = await approvals.send(subjects.APPROVAL_CMD_REQUEST, cmd)
    assert (reply.ok, reply.error.code, reply.error.status, reply.error.details) == (
        False, "invalid_message", 422, {"reason": reason})
    listed = await approvals.send(subjects.APPROVAL_QUERY_LIST, ListApprovalsV1(
        actor=actor("boss", "approver", "manager"), session_id=cmd.session_id, status=None), durable=False)
    assert listed.data["items"] == []  # nothing stored
    await later_marker(approvals, events)  # an event of the refused request would be in by now
    assert not [body for _, _, body in events.items if cmd.session_id in (
        body.get("session_id"), body.get("record", {}).get("session_id"))]
    letter = await dead_letter_of(broker, cmd.operation_id)
    assert reason in letter.headers["Erpilot-Reason"]


async def dead_letter_of(broker, operation_id: str, timeout: float = 10.0):
    """The dead-lettered copy of the request for ``operation_id``."""
    js = broker.config.connection_state.stream
    subject = dead_letter_subject("approval", subjects.APPROVAL_CMD_REQUEST)
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:  # requests are refused one at a time here: the latest dead letter on the subject is this one's
            message = await js.get_last_msg(DEAD_LETTER_STREAM.name, subject)
        except NotFoundError:
            message = None
        if message is not None and operation_id.encode() in message.data:
            return message
        await asyncio.sleep(0.1)
    raise AssertionError(f"no dead letter for {operation_id}")


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
async def test_a_request_the_policy_refuses_stores_nothing_and_the_agent_is_told(approvals, events, changes, code,
                                                                               status) -> None:
    cmd = approvals.request_cmd("submit_order")
    bad = cmd.model_copy(update=changes)
    if "fingerprint" not in changes:  # a correct fingerprint, so the check under test is the one that fails
        bad = bad.model_copy(update={"fingerprint": fingerprint(bad.tool, 1, bad.arguments)})
    # as the ledger would send it, vouched for a call of its tool (an assertion names its call's tool, #32)
    bad = vouch(bad)
    reply = await approvals.send(subjects.APPROVAL_CMD_REQUEST, bad)
    assert (reply.ok, reply.error.code, reply.error.status) == (False, code, status)
    [told] = await events.wait(lambda: events.refused(cmd.operation_id))
    assert (told["call_id"], told["session_id"], told["error"]["code"]) == (cmd.call_id, cmd.session_id, code)
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
        # The ledger is told to commit, once, by the approval service itself, with that grant.
        [(commit, msg_id)] = events.commits_of(record["operation_id"])
        assert commit["grant"] == body["grant"] and msg_id.startswith(f"erp.commit.{record['operation_id']}.")
    else:
        assert body["grant"] is None and events.commits_of(record["operation_id"]) == []


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
        response = await broker.request(body, subjects.APPROVAL_REQ_DECIDE, timeout=10)  # a core request
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

    # Issue 26: the default for every write tool; a requester who also approves may not approve their own.
    order = await approvals.create("submit_order", requested_by="rita")
    own_order = await approvals.decide(order, "approve", actor("rita", "requester", "approver"))
    assert (own_order.error.code, own_order.error.status) == ("separation_of_duties", 403)
    assert (await approvals.decide(order, "reject", actor("rita", "requester", "approver"))).data["status"] == (
        "rejected")  # rejecting stays allowed

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


async def test_the_list_filters_by_tool_requester_and_time_and_pages_with_a_cursor(approvals) -> None:
    session_id = uid("ses-")
    made = [await approvals.create("submit_order", session_id=session_id, requested_by=who)
            for who in ("alice", "alice", "bob", "alice")]
    stock = await approvals.create("adjust_stock", session_id=session_id, requested_by="alice")
    carol = actor("carol", "approver", "manager")

    async def page(**filters) -> dict:
        reply = await approvals.send(subjects.APPROVAL_QUERY_LIST, ListApprovalsV1(
            actor=carol, session_id=session_id, **filters), durable=False)
        assert reply.ok, reply
        return reply.data

    alices = [m["pending_id"] for m in reversed(made) if m["requested_by"] == "alice"]
    assert [i["pending_id"] for i in (await page(tool="submit_order", requested_by="alice"))["items"]] == alices
    assert [i["pending_id"] for i in (await page(tool="adjust_stock"))["items"]] == [stock["pending_id"]]
    since = (await page(since=made[3]["created_at"]))["items"]
    assert {i["pending_id"] for i in since} == {made[3]["pending_id"], stock["pending_id"]}

    seen, cursor = [], None
    while True:
        data = await page(limit=2, cursor=cursor)
        seen += [i["pending_id"] for i in data["items"]]
        if data["next_cursor"] is None:
            break
        cursor = data["next_cursor"]
    assert seen == [stock["pending_id"], *[m["pending_id"] for m in reversed(made)]]
    bad = await approvals.send(subjects.APPROVAL_QUERY_LIST, ListApprovalsV1(actor=carol, cursor="nope"),
                               durable=False)
    assert (bad.error.code, bad.error.status) == ("invalid_cursor", 422)
