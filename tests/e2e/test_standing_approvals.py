"""Standing approvals through HTTP (SPEC §11, issue 34), on the whole stack as processes: an approver approves in
advance a session's orders up to an amount; three writes under the cap commit at once ("standing:<id>" for the
giver on the record, the session's stream and the audit log), the fourth over the cap waits for a person, and after
the revocation every write waits. Giving what the giver may not decide, or bad input, is a 4xx that records
nothing. A chat run's calls are approved at once only until its owner cancels the run: a call the agent makes up
afterwards with the run's assertion waits for a person (security follow-up of #32/#34)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_platform.broker import create_broker, request
from tests.e2e.conftest import Api, wait_for
from tests.e2e.test_model_runs import run_events, start_run
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


async def run_assertion(database_url: str, run_id: str) -> str:
    """What the agent holds of a chat run: the gateway's assertion of the message that started it (agent schema)."""
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetchval("SELECT assertion FROM agent.runs WHERE run_id = $1", run_id)
    finally:
        await conn.close()


async def prepare_as_the_agent(stack, requester: Api, session_id: str, call_id: str, revision: dict,
                               assertion: str) -> str:
    """``cmd.erp.prepare`` of ``submit_order`` for ``revision`` as a compromised agent sends it: a call id of its
    own under the run, with the run's assertion. The operation id."""
    arguments = normalise("submit_order", {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    cmd = PrepareOperationV1(operation_id=f"op_{uuid.uuid4().hex}", session_id=session_id, call_id=call_id,
                             tool="submit_order", arguments=arguments,
                             fingerprint=fingerprint("submit_order", 1, arguments), requested_by=requester.sub,
                             assertion=assertion)
    agent = create_broker(stack.nats_url, "e2e-agent")
    await agent.start()
    try:
        reply = await request(agent, subjects.ERP_CMD_PREPARE, cmd, durable=True, timeout=30)
    finally:
        await agent.stop()
    assert reply.ok, reply
    return cmd.operation_id


def approval_of(approver: Api, session_id: str, call_id: str) -> dict:
    """The approval of ``call_id`` once the ledger's request stored it (whatever its status)."""
    def look() -> dict | None:
        for status in ("approved", "pending"):
            items = approver.get("/v1/approvals", session_id=session_id, status=status).json()["items"]
            found = [item for item in items if item["call_id"] == call_id]
            if found:
                return found[0]
        return None

    return wait_for(look)


def test_a_call_made_up_with_a_cancelled_runs_assertion_waits_for_a_person(stack, admin):
    rita, bob = people(stack)
    session_id = rita.new_session()
    cap = draft(rita, rita.new_session(), [(SKU, 1)])["total_amount_minor"]  # elsewhere: the run sees one draft
    standing_id = stand(bob, session_id, max_amount_minor=cap).json()["standing_id"]
    # A chat run that waits for a person: two boxes are over the cap.
    run_events(rita, session_id, start_run(rita, session_id, f"draft for C-1001: {SKU} x2"))
    run_id = start_run(rita, session_id, "submit")
    run_events(rita, session_id, run_id, end=("approval_pending", "run_failed"))
    wait_for(lambda: rita.get(f"/v1/sessions/{session_id}").json()["run_status"] == "waiting", timeout=15)
    held = asyncio.run(run_assertion(stack.database_url, run_id))

    # While the run goes on, a call of it within the cap is approved at once (what the agent could repeat) ...
    before = f"{run_id}:made_up_{uuid.uuid4().hex[:8]}"
    asyncio.run(prepare_as_the_agent(stack, rita, session_id, before, draft(rita, session_id, [(SKU, 1)]), held))
    assert approval_of(bob, session_id, before)["decided_by"] == f"standing:{standing_id}"

    since = iso(datetime.now(UTC) - timedelta(seconds=1))
    cancelled = rita.post(f"/v1/sessions/{session_id}/runs/{run_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text

    # ... once Rita cancelled it, the agent's next made-up call of the run waits for a person.
    after = f"{run_id}:made_up_{uuid.uuid4().hex[:8]}"
    asyncio.run(prepare_as_the_agent(stack, rita, session_id, after, draft(rita, session_id, [(SKU, 1)]), held))
    waits = approval_of(bob, session_id, after)
    assert (waits["status"], waits["decided_by"]) == ("pending", None), waits
    rows = admin.get("/v1/audit", since=since).json()["items"]
    [ended] = [row for row in rows if row["kind"] == "run_ended" and row["data"]["run_id"] == run_id]
    assert ended["actor"] == rita.sub
    [withheld] = [row for row in rows
                  if row["kind"] == "standing_withheld" and row["pending_id"] == waits["pending_id"]]
    assert (withheld["actor"], withheld["data"]["reason"]) == (f"standing:{standing_id}", "run_ended")
    # Not refused: a person may still approve it.
    approved = bob.post(f"/v1/approvals/{waits['pending_id']}/decision",
                        {"action": "approve", "fingerprint": waits["fingerprint"]})
    assert (approved.status_code, approved.json()["status"]) == (200, "approved"), approved.text


async def standing_runs_of(database_url: str, run_id: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetchval("select count(*) from approval.standing_runs where run_id = $1", run_id)
    finally:
        await conn.close()


def test_a_cancel_of_a_run_no_one_started_is_404_and_records_nothing(stack, admin):
    """Security gap: a well-formed run id (run_ and 32 hex digits) that no one started had the approval service
    record the run as ended (a standing_runs row, an audit run_ended row) before the agent answered 404."""
    rita, _ = people(stack)
    session_id = rita.new_session()
    since = iso(datetime.now(UTC) - timedelta(seconds=1))
    unknown = f"run_{uuid.uuid4().hex}"

    response = rita.post(f"/v1/sessions/{session_id}/runs/{unknown}/cancel")

    assert (response.status_code, response.json()["code"]) == (404, "not_found"), response.text
    assert asyncio.run(standing_runs_of(stack.database_url, unknown)) == 0
    rows = admin.get("/v1/audit", since=since).json()["items"]
    assert [row for row in rows if (row.get("data") or {}).get("run_id") == unknown] == []
