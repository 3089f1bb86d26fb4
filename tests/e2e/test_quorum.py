"""A quorum approval on the whole stack (services as processes, their own NATS and database): with
``approvals_required = 2`` two different managers approving give one grant, one commit and exactly one
ledger effect; the session's SSE stream shows both votes, then the resolution; the same person approving
twice counts once."""

from __future__ import annotations

import pytest

from erpilot_platform.testing.backends import fetch_sql
from tests.e2e.conftest import Api, isolated_stack
from tests.e2e.test_write_flow import decide, finished, request_write

pytestmark = pytest.mark.e2e
SKU = "SKU-COFFEE-1KG"
POLICY = '[tools.adjust_stock]\napprovals_required = 2\n'


@pytest.fixture(scope="module")
def quorum_stack(database_url, tmp_path_factory):
    with isolated_stack(database_url, tmp_path_factory.mktemp("quorum"), {}, policy=POLICY) as running:
        yield running


def on_hand(stack) -> int:
    [row] = fetch_sql(stack.database_url, "select on_hand from erp.products where sku = $1", SKU)
    return row["on_hand"]


def test_two_managers_approve_once_each_and_it_commits_once(quorum_stack) -> None:
    requester = Api(quorum_stack.base_url, "req-quorum", "requester")
    first, second = (Api(quorum_stack.base_url, f"mgr-quorum-{n}", "manager") for n in (1, 2))
    session_id = requester.new_session()
    before = on_hand(quorum_stack)
    pending = request_write(requester, session_id, "adjust_stock", {"sku": SKU, "delta": 4, "reason": "recount"})

    votes = [decide(first, pending, "approve", comment="counted") for _ in range(2)]  # the same person twice
    assert [(v.status_code, v.json()["status"], v.json()["approvals_received"]) for v in votes] == [
        (200, "pending", 1), (200, "pending", 1)]
    record = first.get(f"/v1/approvals/{pending['pending_id']}").json()
    assert (record["approvals_required"], record["approvals_received"], len(record["votes"])) == (2, 1, 1)
    assert (record["can_decide"], record["cannot_decide_reason"]) == (False, "already_voted")

    deciding = decide(second, pending, "approve")
    assert (deciding.status_code, deciding.json()["status"], deciding.json()["decided_by"]) == (
        200, "approved", second.sub)
    view = finished(requester, session_id, pending["call_id"])
    assert view["outcome"] == "succeeded", view

    events = requester.events(session_id, until=lambda evs: any(e["type"] == "tool_finished" for e in evs))
    story = [(e["type"], e["data"].get("sub"), e["data"].get("approvals_received")) for e in events
             if e["type"] in ("approval_vote", "approval_resolved")]
    assert story == [("approval_vote", first.sub, 1), ("approval_vote", second.sub, 2),
                     ("approval_resolved", None, None)]
    resolved = next(e for e in events if e["type"] == "approval_resolved")
    assert (resolved["data"]["status"], resolved["data"]["decided_by"]) == ("approved", second.sub)

    # one grant, one commit, one ledger effect
    grants = fetch_sql(quorum_stack.database_url, "select pending_id from erp.consumed_grants where pending_id = $1",
                       pending["pending_id"])
    operations = fetch_sql(quorum_stack.database_url, "select status from erp.operations where call_id = $1 "
                           "and session_id = $2", pending["call_id"], session_id)
    assert (len(grants), [row["status"] for row in operations]) == (1, ["committed"])
    assert on_hand(quorum_stack) == before + 4
    rows = fetch_sql(quorum_stack.database_url, "select kind from approval.audit_log where pending_id = $1 "
                     "order by seq", pending["pending_id"])
    assert [row["kind"] for row in rows].count("grant_issued") == 1
