"""Standing approvals over NATS on PostgreSQL (issue 34): a revocation and the requests of its session, at once.
Each request either was decided by the standing approval before the revocation (its audit rows come first in
the chain) or waits for a person; none is decided after it, and no request fails (no deadlock surfaces)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.standing import GiveStandingApprovalV1, RevokeStandingApprovalV1
from erpilot_contracts.approval.v1 import AuditQueryV1

from .conftest import actor, uid

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
