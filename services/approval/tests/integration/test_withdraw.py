"""``cmd.approval.withdraw`` on real NATS and PostgreSQL: the owner's cancel of a waiting run.

Exactly one outcome when a withdrawal races a decision (both under the approval's row lock); a
withdrawn approval is never granted; only the requester's approvals of the named session go.
"""

from __future__ import annotations

import asyncio

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import ListApprovalsV1, WithdrawApprovalsV1

from .conftest import actor, later_marker, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]
ALICE = actor("alice", "requester")


def withdraw_cmd(session_id: str, *pending_ids: str, who=ALICE) -> WithdrawApprovalsV1:
    return WithdrawApprovalsV1(session_id=session_id, pending_ids=list(pending_ids), actor=who)


async def test_a_withdrawn_approval_ends_once_and_can_no_longer_be_decided(approvals, events) -> None:
    record = await approvals.create("submit_order", requested_by="alice")

    reply = await approvals.send(subjects.APPROVAL_CMD_WITHDRAW, withdraw_cmd(record["session_id"],
                                                                             record["pending_id"]))

    assert reply.ok and reply.data["items"] == [{"pending_id": record["pending_id"], "status": "withdrawn"}]
    [(_, body)] = await events.wait(lambda: events.of(record["pending_id"]))
    assert (body["status"], body["decided_by"], body["grant"]) == ("withdrawn", "alice", None)
    late = await approvals.decide(record, "approve", actor("bob", "approver"))
    assert (late.error.code, late.error.status) == ("already_decided", 409)
    again = await approvals.send(subjects.APPROVAL_CMD_WITHDRAW, withdraw_cmd(record["session_id"],
                                                                             record["pending_id"]))
    assert again.data["items"] == [{"pending_id": record["pending_id"], "status": "withdrawn"}]
    await later_marker(approvals, events)  # a second outcome event would be in by now
    assert len(events.of(record["pending_id"])) == 1
    got = await approvals.get(record["pending_id"], actor("bob", "approver"))
    assert got.data["status"] == "withdrawn"


@pytest.mark.parametrize("round_", range(4))
async def test_a_withdrawal_racing_approvals_has_exactly_one_outcome(approvals, events, round_) -> None:
    record = await approvals.create("submit_order", requested_by="alice")
    deciders = [approvals.decide(record, "approve", actor(f"approver-{i}", "approver")) for i in range(3)]
    withdrawal = approvals.send(subjects.APPROVAL_CMD_WITHDRAW, withdraw_cmd(record["session_id"],
                                                                            record["pending_id"]))
    *decisions, withdrawn = await asyncio.gather(*deciders, withdrawal)

    [(_, body)] = await events.wait(lambda: events.of(record["pending_id"]))
    await later_marker(approvals, events)
    assert len(events.of(record["pending_id"])) == 1  # one outcome, one event
    [item] = withdrawn.data["items"]
    approved = [reply for reply in decisions if reply.ok]
    if item["status"] == "withdrawn":
        assert not approved and body["status"] == "withdrawn" and body["grant"] is None
        assert {reply.error.code for reply in decisions} == {"already_decided"}
    else:  # a decision came first: it stands, with its grant; the withdrawal changed nothing
        assert item["status"] == "approved" and len(approved) == 1
        assert body["status"] == "approved" and body["grant"] is not None


async def test_only_the_requesters_approvals_of_that_session_are_withdrawn(approvals, events) -> None:
    session_id = uid("ses-")
    own = await approvals.create("submit_order", session_id=session_id, requested_by="alice")
    other_person = await approvals.create("submit_order", session_id=session_id, requested_by="mallory")
    other_session = await approvals.create("submit_order", requested_by="alice")

    reply = await approvals.send(subjects.APPROVAL_CMD_WITHDRAW, withdraw_cmd(
        session_id, own["pending_id"], other_person["pending_id"], other_session["pending_id"], "pa_unknown"))

    statuses = {item["pending_id"]: item["status"] for item in reply.data["items"]}
    assert statuses == {own["pending_id"]: "withdrawn", other_person["pending_id"]: "not_found",
                        other_session["pending_id"]: "not_found", "pa_unknown": "not_found"}
    for untouched in (other_person, other_session):
        assert (await approvals.get(untouched["pending_id"], actor("ada", "admin"))).data["status"] == "pending"


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
