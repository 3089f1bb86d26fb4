"""``cmd.approval.decide_many``: one action on several approvals, all or none, each checked like a single
decision; a refusal names the first failing item with its own code."""

from __future__ import annotations

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import DecideManyV1, DecisionItemV1, GrantV1
from erpilot_platform.grants import verify_grant

from .conftest import VERIFY_KEY, actor, later_marker, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]
BOB = actor("bob", "approver")


async def decide_many(approvals, records: list[dict], action: str, who, *, comment: str | None = None,
                      fingerprints: dict[int, str] | None = None):
    items = [DecisionItemV1(pending_id=r["pending_id"], fingerprint=(fingerprints or {}).get(i, r["fingerprint"]))
             for i, r in enumerate(records)]
    return await approvals.send(subjects.APPROVAL_CMD_DECIDE_MANY,
                                DecideManyV1(action=action, items=items, comment=comment, actor=who))


async def statuses(approvals, records: list[dict]) -> list[str]:
    return [(await approvals.get(r["pending_id"], actor("ada", "admin"))).data["status"] for r in records]


async def test_all_are_approved_in_one_go_each_with_its_grant(approvals, events) -> None:
    records = [await approvals.create("submit_order") for _ in range(3)]
    reply = await decide_many(approvals, records, "approve", BOB, comment="month end")
    assert reply.ok, reply
    assert [(i["pending_id"], i["status"], i["decided_by"], i["comment"]) for i in reply.data["items"]] == [
        (r["pending_id"], "approved", "bob", "month end") for r in records]
    for record in records:
        (_, resolved), = await events.wait(lambda r=record: events.of(r["pending_id"]))
        grant = GrantV1.model_validate(resolved["grant"])
        assert verify_grant(grant, VERIFY_KEY) and grant.operation_id == record["operation_id"]
    again = await decide_many(approvals, records, "approve", BOB, comment="month end")  # a retry
    assert again.ok and again.data == reply.data
    await later_marker(approvals, events)
    assert all(len(events.of(r["pending_id"])) == 1 for r in records)


async def test_one_stale_item_decides_none_and_is_named_with_its_code(approvals, events) -> None:
    records = [await approvals.create("submit_order") for _ in range(3)]
    reply = await decide_many(approvals, records, "approve", BOB, fingerprints={1: "sha256:" + "0" * 64})
    assert (reply.ok, reply.error.code, reply.error.status) == (False, "stale_fingerprint", 409)
    assert reply.error.details == {"pending_id": records[1]["pending_id"], "index": 1}
    assert await statuses(approvals, records) == ["pending"] * 3
    await later_marker(approvals, events)
    assert not any(events.of(r["pending_id"]) for r in records)  # no decision, no grant, no event
    assert (await decide_many(approvals, records, "approve", BOB)).ok  # the same, fixed: all of them


@pytest.mark.parametrize(("bad", "who", "code", "status"), [
    ("adjust_stock", BOB, "forbidden", 403),  # manager only
    ("refund_payment", actor("alice", "manager"), "separation_of_duties", 403),  # her own refund
    ("decided", BOB, "already_decided", 409),
    ("expired", BOB, "expired", 409),
    ("unknown", BOB, "not_found", 404),
])
async def test_every_item_is_checked_for_role_sod_state_and_deadline(approvals, events, bad, who, code,
                                                                     status) -> None:
    first = await approvals.create("submit_order", requested_by="rita")  # not the decider's own
    if bad == "decided":
        odd = await approvals.create("submit_order")
        assert (await approvals.decide(odd, "reject", actor("eve", "approver"))).ok
    elif bad == "expired":
        odd = await approvals.create("cancel_order")  # 2 s ttl here
        await events.wait(lambda: events.of(odd["pending_id"]), timeout=30)
    elif bad == "unknown":
        odd = {**first, "pending_id": uid("pa_")}
    else:
        odd = await approvals.create(bad, requested_by="alice")
    last = await approvals.create("submit_order", requested_by="rita")
    who = actor(who.sub, *who.roles, "approver")  # may approve the submit_orders
    reply = await decide_many(approvals, [first, odd, last], "approve", who)
    assert (reply.ok, reply.error.code, reply.error.status) == (False, code, status)
    assert reply.error.details == {"pending_id": odd["pending_id"], "index": 1}
    assert await statuses(approvals, [first, last]) == ["pending", "pending"]


async def test_the_same_approval_twice_is_refused(approvals) -> None:
    record = await approvals.create("submit_order")
    reply = await decide_many(approvals, [record, record], "reject", BOB)
    assert (reply.error.code, reply.error.status, reply.error.details["index"]) == ("duplicate_item", 422, 1)
    assert await statuses(approvals, [record]) == ["pending"]
