"""Delegation through HTTP (SPEC §10), on the whole stack as processes: a manager away lets a colleague decide with
his roles until a time; the delegate finds the approval in their list, approves it, and the write commits once,
"approved by Ana for Bob" on the record and the session's stream. Revoked or past ``until`` it decides nothing;
separation of duties holds for both people; an admin revokes anyone's (SPEC §11); the refusals are 422 and 404."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.conftest import Api, wait_for
from tests.e2e.test_write_flow import call_events, decide, draft, finished, request_write, stock

pytestmark = pytest.mark.e2e
SKU = "SKU-PEN-BLUE"


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def people(stack) -> tuple[Api, Api, Api]:
    """A requester (rita), an approver away (bob: he may request too), and his delegate (ana: no deciding role)."""
    stamp = time.monotonic_ns()
    return (Api(stack.base_url, f"rita-{stamp}", "requester"),
            Api(stack.base_url, f"bob-{stamp}", "approver", "requester"),
            Api(stack.base_url, f"ana-{stamp}", "requester"))


def give(giver: Api, to: Api, *, until: datetime | None = None, **extra):
    return giver.post("/v1/delegations", {"to": to.sub, "until": iso(until or datetime.now(UTC) + timedelta(days=2)),
                                          **extra})


def order(requester: Api, quantity: int = 1) -> tuple[str, dict]:
    session_id = requester.new_session()
    revision = draft(requester, session_id, [(SKU, quantity)])
    return session_id, request_write(requester, session_id, "submit_order",
                                     {"draft_id": revision["draft_id"], "revision": revision["revision"]})


def test_a_delegate_approves_for_the_delegator_and_the_write_commits_once(stack):
    rita, bob, ana = people(stack)
    session_id, pending = order(rita, 2)
    before = stock(rita, SKU)
    assert ana.get("/v1/approvals", session_id=session_id).json()["items"] == []

    given = give(bob, ana, tools=["submit_order"])
    assert given.status_code == 201, given.text
    body = given.json()
    assert (body["from"], body["to"], body["tools"], body["roles"]) == (bob.sub, ana.sub, ["submit_order"],
                                                                        ["approver"])
    assert [d["delegation_id"] for d in ana.get("/v1/delegations").json()["items"]] == [body["delegation_id"]]
    [listed] = ana.get("/v1/approvals", session_id=session_id).json()["items"]
    assert (listed["pending_id"], listed["can_decide"], listed["can_decide_for"]) == (
        pending["pending_id"], True, bob.sub)

    decided = decide(ana, pending, "approve", comment="for Bob, who is on holiday")
    assert decided.status_code == 200, decided.text
    record = decided.json()
    assert (record["decided_by"], record["decided_on_behalf_of"]) == (ana.sub, bob.sub)
    assert [(v["sub"], v["on_behalf_of"], v["role"]) for v in record["votes"]] == [(ana.sub, bob.sub, "approver")]
    assert finished(rita, session_id, pending["call_id"])["outcome"] == "succeeded"
    assert stock(rita, SKU) == before - 2
    [resolved] = [e["data"] for e in call_events(rita, session_id, pending["call_id"])
                  if e["type"] == "approval_resolved"]
    assert (resolved["decided_by"], resolved["decided_on_behalf_of"]) == (ana.sub, bob.sub)


def test_a_revoked_delegation_and_one_past_its_until_decide_nothing(stack):
    rita, bob, ana = people(stack)
    _, first = order(rita)
    _, second = order(rita)
    delegation_id = give(bob, ana).json()["delegation_id"]

    assert ana.client.delete(f"/v1/delegations/{delegation_id}").status_code == 404  # not hers to revoke
    assert bob.client.delete(f"/v1/delegations/{delegation_id}").status_code == 204
    assert bob.client.delete(f"/v1/delegations/{delegation_id}").status_code == 204  # again: harmless
    refused = decide(ana, first, "approve")
    assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
    assert ana.get("/v1/delegations").json()["items"] == []

    until = datetime.now(UTC) + timedelta(seconds=3)
    assert give(bob, ana, until=until).status_code == 201
    assert decide(ana, first, "approve").status_code == 200  # in force
    time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 0.3)
    late = decide(ana, second, "approve")
    assert (late.status_code, late.json()["code"]) == (403, "forbidden")
    assert wait_for(lambda: ana.get("/v1/approvals").json()["items"] == [])


def test_a_requester_never_reaches_their_own_approval_through_their_delegate(stack):
    _, bob, ana = people(stack)
    _, own = order(bob)  # bob requested it
    assert give(bob, ana).status_code == 201

    refused = decide(ana, own, "approve")
    assert (refused.status_code, refused.json()["code"]) == (403, "separation_of_duties")
    seen = ana.get(f"/v1/approvals/{own['pending_id']}").json()
    assert (seen["status"], seen["can_decide"], seen["cannot_decide_reason"]) == (
        "pending", False, "separation_of_duties")


@pytest.mark.parametrize(("case", "code"), [
    ("self", "delegation_to_self"), ("past", "delegation_in_past"), ("chain", "delegation_chain"),
    ("too_long", "delegation_too_long"),
])
def test_refused_delegations_are_422(stack, case, code):
    rita, bob, ana = people(stack)
    carl = Api(stack.base_url, f"carl-{time.monotonic_ns()}", "manager")
    if case == "self":
        response = give(bob, bob)
    elif case == "past":
        response = give(bob, ana, until=datetime.now(UTC) - timedelta(minutes=1))
    elif case == "too_long":
        response = give(bob, ana, until=datetime.now(UTC) + timedelta(days=91))  # at most 90 days ahead
    else:
        assert give(bob, carl).status_code == 201  # carl is bob's delegate now ...
        response = give(carl, ana)  # ... and may not delegate further
    assert (response.status_code, response.json()["code"]) == (422, code), response.text


def test_only_approvers_and_managers_give_and_nobody_revokes_someone_elses(stack):
    rita, bob, ana = people(stack)
    assert give(rita, ana).status_code == 403
    delegation_id = give(bob, ana).json()["delegation_id"]
    stranger = Api(stack.base_url, f"zoe-{time.monotonic_ns()}", "manager")
    assert stranger.client.delete(f"/v1/delegations/{delegation_id}").status_code == 404
    assert stranger.client.delete("/v1/delegations/dlg_unknown").status_code == 404
    assert [d["delegation_id"] for d in bob.get("/v1/delegations").json()["items"]] == [delegation_id]


def test_an_admin_revokes_anyones_delegation_and_it_decides_nothing_more(stack):
    rita, bob, ana = people(stack)
    _, pending = order(rita)
    delegation_id = give(bob, ana).json()["delegation_id"]
    admin = Api(stack.base_url, f"root-{time.monotonic_ns()}", "admin")  # bob left; the admin ends his delegation

    assert admin.client.delete(f"/v1/delegations/{delegation_id}").status_code == 204
    refused = decide(ana, pending, "approve")
    assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
    assert bob.get("/v1/delegations").json()["items"] == []
