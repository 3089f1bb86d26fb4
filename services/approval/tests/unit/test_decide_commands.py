"""``cmd.approval.decide`` and ``decide_many`` on the memory unit of work: one decision wins, with its signed
grant, its event, the ledger's commit command, its audit rows and its decision-log row in one unit of work;
every refusal leaves the approval as it was, except a late one, which expires it on the spot."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_approval.domain.policy import load_policy
from erpilot_approval.service_layer import decisions
from erpilot_approval.service_layer.bulk_decisions import decide_many
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import Actor, DecideManyV1, DecisionItemV1
from erpilot_platform.grants import verify_grant

from ..fakes import NOW
from .conftest import SIGNING_KEY, Desk, refusal_of

pytestmark = pytest.mark.unit


def commits(desk: Desk) -> list[tuple[str, str, str | None]]:
    """The ``cmd.erp.commit`` messages committed so far: (operation, grant's approval, Nats-Msg-Id)."""
    return [(sent.payload["operation_id"], sent.payload["grant"]["pending_id"], sent.msg_id)
            for sent in desk.uow.sent if sent.subject == subjects.ERP_CMD_COMMIT]


async def test_an_approval_signs_a_grant_and_writes_the_decision_its_event_its_commit_and_its_audit_rows(desk):
    record = await desk.request("submit_order")
    desk.uow.advance(timedelta(seconds=40))

    decided = await desk.decide(record, "approve", "bob", "approver", comment="fine")
    assert (decided.status, decided.decided_by) == ("approved", "bob")
    pending_id = record["pending_id"]
    assert desk.approval(pending_id).decided_at == NOW + timedelta(seconds=40)
    grant = desk.state.grants[pending_id]
    assert verify_grant(grant, SIGNING_KEY.public_key()) and grant.operation_id == record["operation_id"]
    [event] = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    assert (event["status"], event["comment"], event["grant"]["signature"]) == ("approved", "fine", grant.signature)
    # The commit leaves with the decision, after its resolution, carrying the same signed grant.
    assert [sent.subject for sent in desk.uow.sent][-2:] == [subjects.APPROVAL_EVT_RESOLVED, subjects.ERP_CMD_COMMIT]
    assert commits(desk) == [(record["operation_id"], pending_id, f"erp.commit.{record['operation_id']}")]
    assert desk.events(subjects.ERP_CMD_COMMIT)[0]["grant"] == grant.model_dump(mode="json")
    assert [(d.actor, d.action) for d in desk.state.decisions] == [("bob", "approve")]
    assert [row.kind for row in desk.state.audit] == ["request", "vote", "decision", "grant_issued"]
    assert desk.events(subjects.APPROVAL_EVT_VOTED) == []  # one vote decides: the resolution tells it alone


async def test_a_rejection_ends_it_without_a_grant(desk):
    record = await desk.request("submit_order")

    decided = await desk.decide(record, "reject", "bob", "approver", comment="too much")
    assert decided.status == "rejected"
    assert desk.state.grants == {} and commits(desk) == []
    [event] = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    assert (event["status"], event["grant"]) == ("rejected", None)


async def test_the_same_person_repeating_the_same_decision_gets_it_again_and_nothing_new(desk):
    record = await desk.request("submit_order")
    first = await desk.decide(record, "approve", "bob", "approver")
    wakes, sent = desk.uow.wakes, list(desk.uow.sent)
    desk.uow.advance(timedelta(minutes=30))  # past the deadline: the recorded decision still stands

    again = await desk.decide(record, "approve", "bob", "approver")
    assert again.status == "approved" and again.decided_at == first.decided_at
    assert desk.uow.sent == sent and desk.uow.wakes == wakes  # no second commit either
    assert len(desk.state.decisions) == 1


async def test_another_decision_after_the_first_is_already_decided(desk):
    record = await desk.request("submit_order")
    await desk.decide(record, "approve", "bob", "approver")

    refused = await refusal_of(desk.decide(record, "reject", "carol", "manager"))
    assert (refused.code, refused.status) == ("already_decided", 409)
    assert desk.approval(record["pending_id"]).decided_by == "bob"


async def test_a_decision_on_another_fingerprint_is_stale_and_changes_nothing(desk):
    record = await desk.request("submit_order")

    refused = await refusal_of(desk.decide(record, "approve", "bob", "approver", fingerprint="sha256:" + "0" * 64))
    assert (refused.code, refused.status) == ("stale_fingerprint", 409)
    assert desk.approval(record["pending_id"]).status == "pending"
    assert desk.approval(record["pending_id"]).votes == ()


@pytest.mark.parametrize(("tool", "who", "roles", "code"), [
    ("submit_order", "dave", ("requester",), "forbidden"),  # not a role the policy names
    ("refund_payment", "alice", ("manager",), "separation_of_duties"),  # alice requested it
    ("submit_order", "alice", ("requester", "approver"), "separation_of_duties"),  # the default for every write
])
async def test_a_person_who_may_not_decide_is_refused_and_the_approval_stays_pending(desk, tool, who, roles, code):
    record = await desk.request(tool)

    refused = await refusal_of(desk.decide(record, "approve", who, *roles))
    assert (refused.code, refused.status) == (code, 403)
    assert desk.approval(record["pending_id"]).status == "pending"
    assert desk.events(subjects.APPROVAL_EVT_RESOLVED) == [] and commits(desk) == []


async def test_a_decision_at_the_deadline_is_refused_and_expires_the_approval_on_the_spot(desk):
    record = await desk.request("submit_order")
    desk.uow.time = NOW + timedelta(minutes=15)  # exactly expires_at: too late

    refused = await refusal_of(desk.decide(record, "approve", "bob", "approver"))
    assert (refused.code, refused.status) == ("expired", 409)
    expired = desk.approval(record["pending_id"])
    assert (expired.status, expired.decided_at) == ("expired", expired.expires_at)
    assert [e["status"] for e in desk.events(subjects.APPROVAL_EVT_RESOLVED)] == ["expired"]
    assert [(d.actor, d.action) for d in desk.state.decisions] == [("system:expiry", "expire")]
    assert desk.state.grants == {} and commits(desk) == []
    assert desk.uow.wakes == 2  # the request's wake and the expiry's


async def test_under_a_quorum_each_vote_is_told_and_the_last_one_needed_decides():
    desk = Desk(load_policy("[tools.adjust_stock]\napprovals_required = 2\n"))
    record = await desk.request("adjust_stock")

    first = await desk.decide(record, "approve", "mia", "manager")
    assert (first.status, first.approvals_received) == ("pending", 1)
    assert desk.state.grants == {} and desk.events(subjects.APPROVAL_EVT_RESOLVED) == [] and commits(desk) == []
    assert await desk.decide(record, "approve", "mia", "manager") == first  # counted once

    second = await desk.decide(record, "approve", "max", "manager")
    assert second.status == "approved"
    assert commits(desk) == [(record["operation_id"], record["pending_id"], f"erp.commit.{record['operation_id']}")]
    assert [e["vote"]["sub"] for e in desk.events(subjects.APPROVAL_EVT_VOTED)] == ["mia", "max"]
    [resolved] = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    assert [vote["sub"] for vote in resolved["votes"]] == ["mia", "max"]
    assert desk.state.grants[record["pending_id"]].decided_by == "max"


async def test_a_crash_before_the_database_commit_leaves_nothing_and_the_redelivery_decides(desk, monkeypatch):
    record = await desk.request("submit_order")
    reached, armed = [], {"approval.decide.before_db_commit"}

    def failpoint(name):
        reached.append((name, desk.approval(record["pending_id"]).status))  # as committed at that moment
        if name in armed:
            raise SystemExit(137)

    monkeypatch.setattr(decisions, "failpoint", failpoint)
    with pytest.raises(SystemExit):
        await desk.decide(record, "approve", "bob", "approver")
    assert reached == [("approval.decide.before_db_commit", "pending")]
    assert desk.approval(record["pending_id"]).status == "pending"
    assert desk.state.grants == {} and desk.events(subjects.APPROVAL_EVT_RESOLVED) == [] and commits(desk) == []

    armed.clear()
    decided = await desk.decide(record, "approve", "bob", "approver")
    assert reached[1:] == [("approval.decide.before_db_commit", "pending"),
                           ("approval.decide.after_db_commit", "approved")]
    assert decided.status == "approved" and len(commits(desk)) == 1  # one grant, one commit


async def test_a_crash_after_the_decision_commits_keeps_the_decision_and_its_commit(desk, monkeypatch):
    record = await desk.request("submit_order")

    def failpoint(name):
        if name == "approval.decide.after_db_commit":
            raise SystemExit(137)

    monkeypatch.setattr(decisions, "failpoint", failpoint)
    with pytest.raises(SystemExit):
        await desk.decide(record, "approve", "bob", "approver")
    assert desk.approval(record["pending_id"]).status == "approved"
    assert len(commits(desk)) == 1  # committed with the decision: the relay sends it after the restart

    monkeypatch.setattr(decisions, "failpoint", lambda name: None)
    again = await desk.decide(record, "approve", "bob", "approver")  # the redelivered command
    assert again.status == "approved" and len(commits(desk)) == 1


def bulk(action: str, records: list[dict], who: Actor, **fingerprints: str) -> DecideManyV1:
    items = [DecisionItemV1(pending_id=r["pending_id"], fingerprint=fingerprints.get(r["pending_id"], r["fingerprint"]))
             for r in records]
    return DecideManyV1(action=action, items=items, actor=who)


async def test_a_bulk_decision_decides_every_item_together(desk):
    records = [await desk.request("submit_order") for _ in range(3)]

    answer = await decide_many(bulk("approve", records, Actor(sub="bob", roles=["approver"])), desk.ports)
    assert answer.action == "approve" and [item.status for item in answer.items] == ["approved"] * 3
    assert len(desk.state.grants) == 3 and len(desk.events(subjects.APPROVAL_EVT_RESOLVED)) == 3
    assert sorted(commits(desk)) == sorted((r["operation_id"], r["pending_id"], f"erp.commit.{r['operation_id']}")
                                           for r in records)  # each item's own commit
    assert desk.uow.wakes == 4  # three requests, one bulk decision


async def test_a_bulk_decision_with_one_bad_item_decides_none_and_names_it(desk):
    records = [await desk.request("submit_order") for _ in range(3)]
    stale = {records[1]["pending_id"]: "sha256:" + "1" * 64}

    refused = await refusal_of(decide_many(bulk("approve", records, Actor(sub="bob", roles=["approver"]), **stale),
                                           desk.ports))
    assert (refused.code, refused.status) == ("stale_fingerprint", 409)
    assert refused.details == {"pending_id": records[1]["pending_id"], "index": 1}
    assert all(desk.approval(r["pending_id"]).status == "pending" for r in records)
    assert desk.state.grants == {} and desk.events(subjects.APPROVAL_EVT_RESOLVED) == [] and commits(desk) == []
