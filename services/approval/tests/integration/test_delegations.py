"""Delegations over NATS on PostgreSQL (SPEC §10): given, listed, used, revoked, ended by their ``until``, refused;
the delegate's decision names both people in the record, the event and the audit log."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import (
    AuditQueryV1,
    GiveDelegationV1,
    ListApprovalsV1,
    ListDelegationsV1,
    RevokeDelegationV1,
)
from erpilot_contracts.base import ReplyV1

from .conftest import Approvals, actor, at, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]
ADMIN = actor("root", "admin")


class People:
    """Fresh names per test: a manager away (``bob``), his delegate with no deciding role (``ana``)."""

    def __init__(self) -> None:
        tag = uid("")
        self.bob = actor(f"bob-{tag}", "manager")
        self.ana = actor(f"ana-{tag}", "requester")
        self.rita = actor(f"rita-{tag}", "requester")


async def give(approvals: Approvals, giver, to: str, *, until: datetime | None = None,
               tools: list[str] | None = None, delegation_id: str | None = None) -> ReplyV1:
    cmd = GiveDelegationV1(delegation_id=delegation_id or uid("dlg_"), to=to, tools=tools, actor=giver,
                           until=until or datetime.now(UTC) + timedelta(days=2))
    return await approvals.send(subjects.APPROVAL_CMD_DELEGATE, cmd)


async def revoke(approvals: Approvals, delegation_id: str, who) -> ReplyV1:
    return await approvals.send(subjects.APPROVAL_CMD_REVOKE_DELEGATION,
                                RevokeDelegationV1(delegation_id=delegation_id, actor=who))


async def delegations_of(approvals: Approvals, who) -> list[str]:
    reply = await approvals.send(subjects.APPROVAL_QUERY_DELEGATIONS, ListDelegationsV1(actor=who), durable=False)
    return [d["delegation_id"] for d in reply.data["items"]]


async def listed_for(approvals: Approvals, who, session_id: str) -> list[str]:
    reply = await approvals.send(subjects.APPROVAL_QUERY_LIST, ListApprovalsV1(actor=who, session_id=session_id),
                                 durable=False)
    return [item["pending_id"] for item in reply.data["items"]]


async def test_a_delegate_decides_with_the_delegators_roles_and_both_are_recorded(approvals, events) -> None:
    people = People()
    record = await approvals.create("adjust_stock", requested_by=people.rita.sub)  # managers only
    assert await listed_for(approvals, people.ana, record["session_id"]) == []

    given = await give(approvals, people.bob, people.ana.sub, tools=["adjust_stock"])
    assert given.ok, given
    assert (given.data["from"], given.data["to"], given.data["roles"]) == (people.bob.sub, people.ana.sub, ["manager"])
    for who in (people.bob, people.ana):
        assert await delegations_of(approvals, who) == [given.data["delegation_id"]]
    assert await listed_for(approvals, people.ana, record["session_id"]) == [record["pending_id"]]
    seen = (await approvals.get(record["pending_id"], people.ana)).data
    assert (seen["can_decide"], seen["can_decide_for"]) == (True, people.bob.sub)

    decided = await approvals.decide(record, "approve", people.ana, comment="for bob, who is away")
    assert decided.ok, decided
    assert (decided.data["decided_by"], decided.data["decided_on_behalf_of"]) == (people.ana.sub, people.bob.sub)
    assert [(v["sub"], v["on_behalf_of"]) for v in decided.data["votes"]] == [(people.ana.sub, people.bob.sub)]
    [(_, resolved)] = await events.wait(lambda: events.of(record["pending_id"]))
    assert (resolved["decided_by"], resolved["decided_on_behalf_of"]) == (people.ana.sub, people.bob.sub)
    assert resolved["grant"]["decided_by"] == people.ana.sub

    audit = await approvals.send(subjects.APPROVAL_QUERY_AUDIT,
                                 AuditQueryV1(actor=ADMIN, pending_id=record["pending_id"]), durable=False)
    rows = {row["kind"]: row for row in audit.data["items"]}
    assert (rows["vote"]["actor"], rows["vote"]["data"]["on_behalf_of"]) == (people.ana.sub, people.bob.sub)
    assert (rows["decision"]["actor"], rows["decision"]["data"]["on_behalf_of"]) == (people.ana.sub, people.bob.sub)
    since = datetime.fromisoformat(given.data["created_at"]) - timedelta(seconds=1)
    gives = await approvals.send(subjects.APPROVAL_QUERY_AUDIT, AuditQueryV1(actor=ADMIN, since=since), durable=False)
    assert [row["actor"] for row in gives.data["items"] if row["kind"] == "delegation_given"
            and row["data"]["delegation_id"] == given.data["delegation_id"]] == [people.bob.sub]


async def test_a_revoked_delegation_decides_nothing_and_only_its_delegator_revokes_it(approvals) -> None:
    people = People()
    record = await approvals.create("adjust_stock", requested_by=people.rita.sub)
    delegation_id = (await give(approvals, people.bob, people.ana.sub)).data["delegation_id"]

    for intruder in (people.ana, actor("zoe", "manager")):
        refused = await revoke(approvals, delegation_id, intruder)
        assert (refused.error.code, refused.error.status) == ("not_found", 404)
    revoked = await revoke(approvals, delegation_id, people.bob)
    assert revoked.ok and revoked.data["revoked_at"] is not None
    assert (await revoke(approvals, delegation_id, people.bob)).data == revoked.data  # again: the same answer

    refused = await approvals.decide(record, "approve", people.ana)
    assert (refused.error.code, refused.error.status) == ("forbidden", 403)
    assert await delegations_of(approvals, people.ana) == []
    assert (await approvals.get(record["pending_id"], people.bob)).data["status"] == "pending"


async def test_a_delegation_ends_at_its_until_by_the_database_clock(approvals) -> None:
    people = People()
    first = await approvals.create("adjust_stock", requested_by=people.rita.sub)
    second = await approvals.create("adjust_stock", requested_by=people.rita.sub)
    given = await give(approvals, people.bob, people.ana.sub, until=datetime.now(UTC) + timedelta(seconds=2))
    assert (await approvals.decide(first, "approve", people.ana)).ok

    await asyncio.sleep(max(0.0, at(given.data["until"]).timestamp() - datetime.now(UTC).timestamp()) + 0.2)
    late = await approvals.decide(second, "approve", people.ana)
    assert (late.error.code, late.error.status) == ("forbidden", 403)
    assert await delegations_of(approvals, people.bob) == []


async def test_separation_of_duties_holds_for_the_delegate_and_the_delegator(approvals) -> None:
    people = People()
    bobs_own = await approvals.create("adjust_stock", requested_by=people.bob.sub)
    anas_own = await approvals.create("adjust_stock", requested_by=people.ana.sub)
    assert (await give(approvals, people.bob, people.ana.sub)).ok

    for record in (bobs_own, anas_own):  # bob reaching his own through ana; ana approving her own for bob
        refused = await approvals.decide(record, "approve", people.ana)
        assert (refused.error.code, refused.error.status) == ("separation_of_duties", 403)
        seen = (await approvals.get(record["pending_id"], people.ana)).data
        assert (seen["can_decide"], seen["cannot_decide_reason"]) == (False, "separation_of_duties")


@pytest.mark.parametrize(("who", "to", "until", "code", "status"), [
    ("bob", "bob", timedelta(days=1), "delegation_to_self", 422),
    ("bob", "ana", timedelta(seconds=-5), "delegation_in_past", 422),
    ("rita", "ana", timedelta(days=1), "forbidden", 403),
])
async def test_refused_gives_store_nothing(approvals, who, to, until, code, status) -> None:
    people = People()
    giver = getattr(people, who)
    refused = await give(approvals, giver, getattr(people, to).sub, until=datetime.now(UTC) + until)

    assert (refused.error.code, refused.error.status) == (code, status)
    assert await delegations_of(approvals, giver) == []


async def test_a_chain_is_refused_in_either_order_and_a_redelivered_give_stores_one(approvals) -> None:
    people = People()
    carl = actor(f"carl-{uid('')}", "manager")
    delegation_id = uid("dlg_")
    first = await give(approvals, people.bob, people.ana.sub, delegation_id=delegation_id)
    again = await give(approvals, people.bob, people.ana.sub, delegation_id=delegation_id,
                       until=at(first.data["until"]))
    assert again.data == first.data

    onward = await give(approvals, actor(people.ana.sub, "approver"), carl.sub)
    inward = await give(approvals, carl, people.bob.sub)
    assert [(r.error.code, r.error.status) for r in (onward, inward)] == [("delegation_chain", 422)] * 2
    assert await delegations_of(approvals, people.bob) == [delegation_id]
