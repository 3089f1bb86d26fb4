"""Standing approvals through HTTP (SPEC §11, issue 34), on the whole stack as processes: an approver approves in
advance a session's orders up to an amount; three writes under the cap commit at once ("standing:<id>" for the
giver on the record, the session's stream and the audit log), the fourth over the cap waits for a person, and after
the revocation every write waits. Giving what the giver may not decide, or bad input, is a 4xx that records
nothing."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.conftest import Api
from tests.e2e.test_write_flow import call_events, draft, finished

pytestmark = pytest.mark.e2e
SKU = "SKU-PEN-BLUE"


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def people(stack) -> tuple[Api, Api]:
    """A requester (rita) and an approver (bob)."""
    stamp = time.monotonic_ns()
    return Api(stack.base_url, f"rita-{stamp}", "requester"), Api(stack.base_url, f"bob-{stamp}", "approver")


def stand(giver: Api, session_id: str, tool: str = "submit_order", *, days: float = 2, **extra):
    until = iso(datetime.now(UTC) + timedelta(days=days))
    return giver.post("/v1/standing-approvals", {"session_id": session_id, "tool": tool, "until": until, **extra})


def submit(requester: Api, session_id: str, revision: dict):
    """The write's answer: 200 once finished, 202 while awaiting approval."""
    return requester.call(session_id, "submit_order", {"draft_id": revision["draft_id"],
                                                       "revision": revision["revision"]})


def waiting(approver: Api, call: dict) -> bool:
    """The call's approval still waits for a person. Its record is final once the call names it: a standing
    approval decides in the transaction that stores the approval and its ``evt.approval.requested``."""
    record = approver.get(f"/v1/approvals/{call['pending_id']}").json()
    return (record["status"], record["decided_by"]) == ("pending", None)


def resolution(requester: Api, session_id: str, call_id: str) -> dict:
    [resolved] = [e["data"] for e in call_events(requester, session_id, call_id) if e["type"] == "approval_resolved"]
    return resolved


def test_writes_under_the_cap_commit_at_once_over_it_or_after_revocation_they_wait(stack, admin):
    rita, bob = people(stack)
    session_id = rita.new_session()
    cap = draft(rita, session_id, [(SKU, 1)])["total_amount_minor"]  # what one pen costs

    given = stand(bob, session_id, max_amount_minor=cap)
    assert given.status_code == 201, given.text
    standing = given.json()
    assert (standing["given_by"], standing["tool"], standing["max_amount_minor"]) == (bob.sub, "submit_order", cap)
    assert [s["standing_id"] for s in bob.get("/v1/standing-approvals").json()["items"]] == [standing["standing_id"]]

    for _ in range(3):  # a draft each, quoted after the previous order took its stock (stock_check exact)
        call = submit(rita, session_id, draft(rita, session_id, [(SKU, 1)])).json()
        view = finished(rita, session_id, call["call_id"])
        assert view["outcome"] == "succeeded", (view["error"], view)
        resolved = resolution(rita, session_id, call["call_id"])
        assert (resolved["decided_by"], resolved["decided_on_behalf_of"]) == (f"standing:{standing['standing_id']}",
                                                                              bob.sub)
    audit = admin.get("/v1/audit", pending_id=resolved["pending_id"]).json()["items"]
    [decision] = [row for row in audit if row["kind"] == "decision"]
    assert (decision["actor"], decision["data"]["on_behalf_of"]) == (f"standing:{standing['standing_id']}", bob.sub)

    large = draft(rita, session_id, [(SKU, 3)])
    assert large["total_amount_minor"] > cap
    over = submit(rita, session_id, large)
    assert (over.status_code, over.json()["status"]) == (202, "awaiting_approval"), over.text
    assert waiting(bob, over.json())

    assert bob.client.delete(f"/v1/standing-approvals/{standing['standing_id']}").status_code == 204
    assert bob.get("/v1/standing-approvals").json()["items"] == []
    after = submit(rita, session_id, draft(rita, session_id, [(SKU, 1)]))
    assert (after.status_code, after.json()["status"]) == (202, "awaiting_approval"), after.text
    assert waiting(bob, after.json())


@pytest.mark.parametrize("tool, extra, days, status, code", [
    ("refund_payment", {}, 2, 403, "standing_beyond_authority"),  # managers decide refunds
    ("submit_order", {}, 2, 403, "standing_beyond_authority"),  # no cap: up to amounts only managers decide
    ("no_such_tool", {}, 2, 422, "unknown_tool"),
    ("get_product", {}, 2, 422, "not_a_write_tool"),
    ("submit_order", {"max_amount_minor": 100}, -1, 422, "standing_in_past"),
    ("submit_order", {"max_amount_minor": 100}, 91, 422, "standing_too_long"),
    ("submit_order", {"max_amount_minor": -1}, 2, 422, "invalid_amount"),
])
def test_a_standing_approval_the_giver_may_not_give_is_refused_and_nothing_is_recorded(stack, admin, tool, extra,
                                                                                        days, status, code):
    rita, bob = people(stack)
    session_id = rita.new_session()
    since = iso(datetime.now(UTC) - timedelta(seconds=1))

    refused = stand(bob, session_id, tool, days=days, **extra)

    assert (refused.status_code, refused.json()["code"]) == (status, code), refused.text
    assert bob.get("/v1/standing-approvals").json()["items"] == []
    rows = admin.get("/v1/audit", since=since).json()["items"]
    assert [row for row in rows if row["kind"] == "standing_given" and row["actor"] == bob.sub] == []


def test_only_its_giver_or_an_admin_revokes_it(stack, admin):
    rita, bob = people(stack)
    session_id = rita.new_session()
    standing_id = stand(bob, session_id, max_amount_minor=100).json()["standing_id"]
    other = Api(stack.base_url, f"carl-{time.monotonic_ns()}", "approver")

    assert other.client.delete(f"/v1/standing-approvals/{standing_id}").status_code == 404
    assert standing_id in [s["standing_id"] for s in admin.get("/v1/standing-approvals").json()["items"]]
    assert admin.client.delete(f"/v1/standing-approvals/{standing_id}").status_code == 204
    assert bob.get("/v1/standing-approvals").json()["items"] == []
