"""Standing approvals over NATS on PostgreSQL (issue 34): a revocation and the requests of its session, at once.
Each request either was decided by the standing approval before the revocation (its audit rows come first in
the chain) or waits for a person; none is decided after it, and no request fails (no deadlock surfaces). The same
for the end of a chat run and the requests of its calls, which standing approvals also approve at most
``max_writes_per_run`` (5 by default) of, however many come at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.standing import EndRunV1, GiveStandingApprovalV1, RevokeStandingApprovalV1
from erpilot_contracts.approval.v1 import AuditQueryV1
from erpilot_platform.assertions import sign_assertion

from .conftest import ASSERTION_KEY, actor, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]
ADMIN = actor("root", "admin")


async def test_a_revocation_racing_requests_ends_the_standing_approval_for_every_later_one(approvals) -> None:
    bob, session_id, standing_id = actor(uid("bob-"), "approver"), uid("ses-"), uid("sa_")
    given = await approvals.send(subjects.APPROVAL_CMD_STAND, GiveStandingApprovalV1(
        standing_id=standing_id, session_id=session_id, tool="submit_order", max_amount_minor=50_000,
        until=datetime.now(UTC) + timedelta(days=1), actor=bob))
    assert given.ok, given
    since = datetime.fromisoformat(given.data["created_at"]) - timedelta(seconds=1)

    async def request() -> dict:
        reply = await approvals.send(subjects.APPROVAL_CMD_REQUEST,
                                     approvals.request_cmd(session_id=session_id, amount_minor=10_000))
        assert reply.ok, reply
        return reply.data

    revoke = approvals.send(subjects.APPROVAL_CMD_REVOKE_STANDING,
                            RevokeStandingApprovalV1(standing_id=standing_id, actor=bob))
    *records, revoked = await asyncio.gather(*(request() for _ in range(8)), revoke)
    after = [await request() for _ in range(2)]

    assert revoked.ok, revoked
    decider = f"standing:{standing_id}"
    assert {(r["status"], r["decided_by"]) for r in records} <= {("approved", decider), ("pending", None)}
    assert [(r["status"], r["decided_by"]) for r in after] == [("pending", None)] * 2
    audit = await approvals.send(subjects.APPROVAL_QUERY_AUDIT, AuditQueryV1(actor=ADMIN, since=since), durable=False)
    rows = audit.data["items"]
    [revocation] = [row["seq"] for row in rows if row["kind"] == "standing_revoked"
                    and row["data"]["standing_id"] == standing_id]
    decisions = [row["seq"] for row in rows if row["kind"] == "decision" and row["actor"] == decider]
    assert len(decisions) == sum(r["status"] == "approved" for r in records)
    assert all(seq < revocation for seq in decisions)


async def test_the_end_of_a_run_racing_its_calls_ends_standing_approvals_for_it_and_at_most_5_are_approved(
        approvals) -> None:
    bob, session_id, standing_id, run_id = actor(uid("bob-"), "approver"), uid("ses-"), uid("sa_"), uid("run_")
    given = await approvals.send(subjects.APPROVAL_CMD_STAND, GiveStandingApprovalV1(
        standing_id=standing_id, session_id=session_id, tool="submit_order", max_amount_minor=50_000,
        until=datetime.now(UTC) + timedelta(days=1), actor=bob))
    assert given.ok, given
    since = datetime.fromisoformat(given.data["created_at"]) - timedelta(seconds=1)

    async def request() -> dict:
        reply = await approvals.send(subjects.APPROVAL_CMD_REQUEST, approvals.request_cmd(
            session_id=session_id, amount_minor=10_000, run_id=run_id))
        assert reply.ok, reply
        return reply.data

    cancel = sign_assertion(ASSERTION_KEY, sub="alice", roles=["requester"], session_id=session_id, run_id=run_id,
                            cancel=True)
    end = approvals.send(subjects.APPROVAL_CMD_END_RUN, EndRunV1(session_id=session_id, run_id=run_id,
                                                                 owner="alice", assertion=cancel))
    *records, ended = await asyncio.gather(*(request() for _ in range(8)), end)
    after = [await request() for _ in range(2)]

    assert ended.ok, ended
    decider = f"standing:{standing_id}"
    approved = sum(r["status"] == "approved" for r in records)
    assert approved <= 5 and ended.data["standing_approved"] == approved
    assert {(r["status"], r["decided_by"]) for r in records} <= {("approved", decider), ("pending", None)}
    assert [(r["status"], r["decided_by"]) for r in after] == [("pending", None)] * 2
    audit = await approvals.send(subjects.APPROVAL_QUERY_AUDIT, AuditQueryV1(actor=ADMIN, since=since), durable=False)
    rows = audit.data["items"]
    [end_seq] = [row["seq"] for row in rows if row["kind"] == "run_ended" and row["data"]["run_id"] == run_id]
    decisions = [row["seq"] for row in rows if row["kind"] == "decision" and row["actor"] == decider]
    withheld = [row for row in rows if row["kind"] == "standing_withheld" and row["data"]["run_id"] == run_id]
    assert len(decisions) == approved and all(seq < end_seq for seq in decisions)
    assert len(withheld) == 10 - approved
    assert all(row["data"]["reason"] == ("run_ended" if row["seq"] > end_seq else "run_limit_reached")
               for row in withheld)
