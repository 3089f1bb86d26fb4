"""The approval record says, for the person asking, whether they may decide it and why not (SPEC §9)."""

from __future__ import annotations

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import ListApprovalsV1

from .conftest import actor, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]


async def test_get_says_who_may_decide_and_why_not(approvals) -> None:
    refund = await approvals.create("refund_payment", requested_by="alice")  # manager, SoD

    def verdict(reply) -> tuple:
        return reply.data["can_decide"], reply.data["cannot_decide_reason"]

    assert verdict(await approvals.get(refund["pending_id"], actor("carol", "manager"))) == (True, None)
    own = await approvals.get(refund["pending_id"], actor("alice", "requester", "manager"))
    assert verdict(own) == (False, "separation_of_duties")
    requester_only = await approvals.get(refund["pending_id"], actor("alice", "requester"))
    assert verdict(requester_only) == (False, "role")

    assert (await approvals.decide(refund, "approve", actor("carol", "manager"))).data["status"] == "approved"
    after = await approvals.get(refund["pending_id"], actor("dave", "manager"))
    assert verdict(after) == (False, "already_decided")


async def test_each_listed_item_carries_the_verdict_for_the_lister(approvals) -> None:
    session_id = uid("ses-")
    own = await approvals.create("refund_payment", session_id=session_id, requested_by="mia")
    other = await approvals.create("refund_payment", session_id=session_id, requested_by="alice")
    reply = await approvals.send(subjects.APPROVAL_QUERY_LIST,
                                 ListApprovalsV1(actor=actor("mia", "manager"), session_id=session_id),
                                 durable=False)
    verdicts = {item["pending_id"]: (item["can_decide"], item["cannot_decide_reason"])
                for item in reply.data["items"]}
    assert verdicts == {own["pending_id"]: (False, "separation_of_duties"), other["pending_id"]: (True, None)}
