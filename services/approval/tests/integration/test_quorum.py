"""Quorum approvals over NATS on real PostgreSQL: one grant whoever races, one vote per person, a reject
ends it, the deadline ends it whatever the votes, an edit starts over."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from erpilot_approval.app import build
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_platform.grants import verify_grant

from .conftest import VERIFY_KEY, actor, at, later_marker

QUORUM_POLICY = '''
[tools.adjust_stock]
approvals_required = 2

[tools.cancel_order]
ttl = "2s"
approvals_required = 2

[tools.submit_order]
rejections_to_reject = 2
'''
MANAGERS = [actor(f"manager-{i}", "manager") for i in range(4)]


@pytest.fixture(scope="module")
async def quorum_service(settings_for, tmp_path_factory):
    policy = tmp_path_factory.mktemp("quorum") / "policy.toml"
    policy.write_text(QUORUM_POLICY)
    app = build(settings_for(policy=policy))
    await app.start()
    yield app
    await app.stop()


pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("quorum_service")]


def voted(events, pending_id: str) -> list[dict]:
    return [body for _, subject, body in events.items
            if subject == subjects.APPROVAL_EVT_VOTED and body["pending_id"] == pending_id]


async def vote_rows(database_url: str, pending_id: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetch("select voter, role, action from approval.votes where pending_id = $1 "
                                "order by vote_id", pending_id)
    finally:
        await conn.close()


async def test_two_approvers_racing_give_one_grant(approvals, events, database_url) -> None:
    for first_voters in ([], [MANAGERS[0]]):  # racing for the first two votes, and for the deciding one
        record = await approvals.create("adjust_stock")
        assert (record["approvals_required"], record["approvals_received"], record["votes"]) == (2, 0, [])
        for who in first_voters:
            assert (await approvals.decide(record, "approve", who)).data["status"] == "pending"
        racers = MANAGERS[1:3] if first_voters else MANAGERS[:2]
        replies = await asyncio.gather(*(approvals.decide(record, "approve", who) for who in racers))

        approved = [reply for reply in replies if reply.ok and reply.data["status"] == "approved"]
        assert len(approved) == 1, replies
        (_, resolved), = await events.wait(lambda r=record: events.of(r["pending_id"]))
        assert resolved["status"] == "approved"
        grant = GrantV1.model_validate(resolved["grant"])
        assert verify_grant(grant, VERIFY_KEY) and grant.decided_by == approved[0].data["decided_by"]
        others = [reply for reply in replies if reply is not approved[0]]
        if first_voters:  # the loser came after the quorum
            assert [(r.ok, r.error.code) for r in others] == [(False, "already_decided")]
        else:  # the loser voted first and was still waiting for a second approver
            assert [(r.ok, r.data["status"], r.data["approvals_received"]) for r in others] == [(True, "pending", 1)]
        await later_marker(approvals, events)
        assert len(events.of(record["pending_id"])) == 1  # one resolution, one grant
        assert [body["approvals_received"] for body in voted(events, record["pending_id"])] == [1, 2]
        stored = (await approvals.get(record["pending_id"], MANAGERS[3])).data
        assert (stored["status"], stored["approvals_received"], len(stored["votes"])) == ("approved", 2, 2)
        assert len(await vote_rows(database_url, record["pending_id"])) == 2


async def test_the_same_person_approving_twice_counts_once(approvals, events, database_url) -> None:
    record = await approvals.create("adjust_stock")
    replies = await asyncio.gather(*(approvals.decide(record, "approve", MANAGERS[0]) for _ in range(4)))
    assert {(r.ok, r.data["status"], r.data["approvals_received"]) for r in replies} == {(True, "pending", 1)}
    mind_changed = await approvals.decide(record, "reject", MANAGERS[0])
    assert (mind_changed.error.code, mind_changed.error.status) == ("already_voted", 409)
    seen = (await approvals.get(record["pending_id"], MANAGERS[0])).data
    assert (seen["can_decide"], seen["cannot_decide_reason"]) == (False, "already_voted")
    assert [tuple(row) for row in await vote_rows(database_url, record["pending_id"])] == [
        ("manager-0", "manager", "approve")]
    assert (await approvals.decide(record, "approve", MANAGERS[1])).data["status"] == "approved"


async def test_a_reject_after_one_approve_ends_it_rejected(approvals, events) -> None:
    record = await approvals.create("adjust_stock")
    assert (await approvals.decide(record, "approve", MANAGERS[0], comment="looks right")).ok
    rejected = await approvals.decide(record, "reject", MANAGERS[1], comment="wrong SKU")
    assert (rejected.data["status"], rejected.data["decided_by"], rejected.data["comment"]) == (
        "rejected", "manager-1", "wrong SKU")
    assert [(v["sub"], v["role"], v["action"], v["comment"]) for v in rejected.data["votes"]] == [
        ("manager-0", "manager", "approve", "looks right"), ("manager-1", "manager", "reject", "wrong SKU")]
    (_, resolved), = await events.wait(lambda: events.of(record["pending_id"]))
    assert (resolved["status"], resolved["grant"]) == ("rejected", None)
    assert (await approvals.decide(record, "approve", MANAGERS[2])).error.code == "already_decided"


async def test_rejections_to_reject_needs_that_many_distinct_rejects(approvals, events, database_url) -> None:
    record = await approvals.create("submit_order")  # one approve decides, two rejects end it
    assert (record["approvals_required"], record["rejections_to_reject"]) == (1, 2)
    first = await approvals.decide(record, "reject", MANAGERS[0], comment="wrong customer")
    assert (first.data["status"], first.data["decided_by"]) == ("pending", None)
    again = await approvals.decide(record, "reject", MANAGERS[0])  # the same person: counted once
    assert (again.data["status"], len(again.data["votes"])) == ("pending", 1)
    stored = (await approvals.get(record["pending_id"], MANAGERS[1])).data
    assert (stored["status"], stored["rejections_to_reject"], stored["can_decide"]) == ("pending", 2, True)
    second = await approvals.decide(record, "reject", MANAGERS[1], comment="agreed")
    assert (second.data["status"], second.data["decided_by"], second.data["comment"]) == (
        "rejected", "manager-1", "agreed")
    (_, resolved), = await events.wait(lambda: events.of(record["pending_id"]))
    assert (resolved["status"], resolved["grant"]) == ("rejected", None)
    # the resolution carries every vote: a consumer it reaches first still shows them before it
    assert [(v["sub"], v["action"]) for v in resolved["votes"]] == [("manager-0", "reject"), ("manager-1", "reject")]
    await events.wait(lambda: len(voted(events, record["pending_id"])) == 2 or None)
    assert [(b["vote"]["sub"], b["status"]) for b in voted(events, record["pending_id"])] == [
        ("manager-0", "pending"), ("manager-1", "rejected")]
    assert [tuple(row) for row in await vote_rows(database_url, record["pending_id"])] == [
        ("manager-0", "manager", "reject"), ("manager-1", "manager", "reject")]


async def test_a_quorum_not_reached_expires_at_the_deadline(approvals, events) -> None:
    record = await approvals.create("cancel_order")  # 2 s ttl, two approvers
    assert (await approvals.decide(record, "approve", actor("ann", "approver"))).data["approvals_received"] == 1
    (_, resolved), = await events.wait(lambda: events.of(record["pending_id"]), timeout=30)
    assert (resolved["status"], resolved["grant"]) == ("expired", None)
    assert at(resolved["decided_at"]) == at(record["expires_at"])
    late = await approvals.decide(record, "approve", actor("bo", "approver"))
    assert (late.error.code, late.error.status) == ("expired", 409)
    again = await approvals.decide(record, "approve", actor("ann", "approver"))
    assert again.error.code == "expired"  # her earlier vote does not make it hers to repeat
    stored = (await approvals.get(record["pending_id"], actor("ann", "approver"))).data
    assert (stored["status"], stored["approvals_received"]) == ("expired", 1)


async def test_an_edit_starts_a_new_version_with_no_votes(approvals, events) -> None:
    record = await approvals.create("adjust_stock")
    assert (await approvals.decide(record, "approve", MANAGERS[0])).ok
    edited = await approvals.edit(record, {"sku": "SKU-1", "delta": -1, "reason": "count"}, MANAGERS[1])
    assert edited.ok, edited
    assert (edited.data["approvals_required"], edited.data["approvals_received"], edited.data["votes"]) == (2, 0, [])
    assert (await approvals.decide(edited.data, "approve", MANAGERS[0])).data["status"] == "pending"
    assert (await approvals.decide(edited.data, "approve", MANAGERS[2])).data["status"] == "approved"
