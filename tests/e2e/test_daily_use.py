"""Daily use over HTTP (SPEC §9): find your sessions, keep talking while an approval waits, cancel it.

On the shared e2e stack with the offline ``rules`` model: ``draft for …`` then ``submit`` leaves a
run waiting for an approver.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import CancelRunV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform import cursors
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.broker import create_broker, request
from erpilot_platform.grants import load_signing_key
from tests.e2e.conftest import Api, wait_for
from tests.e2e.test_model_runs import assistant_texts, run_events, start_run

pytestmark = pytest.mark.e2e


def waiting_submit(api: Api) -> tuple[str, str, dict]:
    """A session whose ``submit`` run waits for an approval: (session_id, run_id, approval_pending data)."""
    session_id = api.new_session()
    run_events(api, session_id, start_run(api, session_id, "draft for C-1001: SKU-PAPER-A4 x2"))
    run_id = start_run(api, session_id, "submit")
    events = run_events(api, session_id, run_id, end=("approval_pending", "run_failed"))
    [pending] = [e["data"] for e in events if e["type"] == "approval_pending"]
    wait_for(lambda: api.get(f"/v1/sessions/{session_id}").json()["run_status"] == "waiting", timeout=15)
    return session_id, run_id, pending


def test_a_message_while_an_approval_waits_runs_beside_it_and_sees_the_pending_call(requester: Api):
    session_id, waiting_run, pending = waiting_submit(requester)

    other = start_run(requester, session_id, "find product pen")
    events = run_events(requester, session_id, other)

    [answer] = assistant_texts([e for e in events if e["data"].get("run_id") == other])
    assert "SKU-PEN-BLUE" in answer
    view = requester.get(f"/v1/sessions/{session_id}").json()
    statuses = {r["run_id"]: r["status"] for r in view["runs"]}
    assert statuses[waiting_run] == "waiting" and statuses[other] == "finished"
    assert [p["pending_id"] for p in view["pending_approvals"]] == [pending["pending_id"]]


def test_cancelling_a_waiting_run_withdraws_its_approval_and_nothing_commits(requester: Api, approver: Api):
    session_id, run_id, pending = waiting_submit(requester)
    pending_id = pending["pending_id"]
    assert pending_id in [a["pending_id"] for a in approver.get("/v1/approvals").json()["items"]]

    response = requester.post(f"/v1/sessions/{session_id}/runs/{run_id}/cancel")

    assert response.status_code == 200, response.text
    assert response.json() == {"run_id": run_id, "status": "cancelled",
                               "approvals": [{"pending_id": pending_id, "status": "withdrawn"}]}
    events = requester.events(session_id, until=lambda evs: any(
        e["type"] == "tool_finished" and e["data"]["call_id"] == pending["call_id"] for e in evs))
    types = [e["type"] for e in events]
    assert "approval_withdrawn" in types and "approval_resolved" not in types[types.index("approval_pending"):]
    withdrawn = next(e["data"] for e in events if e["type"] == "approval_withdrawn")
    assert withdrawn == {"call_id": pending["call_id"], "pending_id": pending_id, "withdrawn_by": requester.sub}
    finished = next(e["data"] for e in events if e["type"] == "tool_finished"
                    and e["data"]["call_id"] == pending["call_id"])
    assert (finished["outcome"], finished["error"]["code"]) == ("not_executed", "withdrawn")
    assert any(e["type"] == "run_failed" and e["data"]["error"]["code"] == "cancelled" for e in events)

    assert pending_id not in [a["pending_id"] for a in approver.get("/v1/approvals").json()["items"]]
    record = approver.get(f"/v1/approvals/{pending_id}").json()
    assert (record["status"], record["decided_by"]) == ("withdrawn", requester.sub)
    late = approver.post(f"/v1/approvals/{pending_id}/decision",
                         {"action": "approve", "fingerprint": pending["fingerprint"]})
    assert late.status_code == 409 and late.json()["code"] == "already_decided"
    operation = requester.get(f"/v1/sessions/{session_id}/tool-calls/{pending['call_id']}").json()
    assert operation["status"] == "finished" and operation["outcome"] == "not_executed"
    assert requester.get(f"/v1/operations/{operation['operation_id']}").json()["status"] == "prepared"

    again = requester.post(f"/v1/sessions/{session_id}/runs/{run_id}/cancel")
    assert again.status_code == 200 and again.json()["approvals"] == []
    view = requester.get(f"/v1/sessions/{session_id}").json()
    assert {r["run_id"]: r["status"] for r in view["runs"]}[run_id] == "cancelled"
    assert view["pending_approvals"] == []


def test_a_cancel_the_gateway_never_answers_still_withdraws_the_approval(stack, requester: Api, approver: Api):
    """The gateway dies right after sending the cancel to the agent: here, the cancel (with the gateway's
    requester assertion) is sent to the agent directly and nobody reads the outcome. The agent's cancel record
    (its outbox, the only path) makes the approval service withdraw the run's approval all the same."""
    session_id, run_id, pending = waiting_submit(requester)
    key = load_signing_key(stack.env_for("gateway")[0]["ERPILOT_ASSERTION_SIGNING_KEY"])  # the gateway's key
    vouched = sign_assertion(key, sub=requester.sub, roles=["requester"], session_id=session_id, run_id=run_id,
                             cancel=True)  # the purpose the gateway signs a cancel with

    async def cancel_at_the_agent() -> ReplyV1:
        broker = create_broker(stack.nats_url, "e2e-gateway")
        await broker.start()
        try:
            return await request(broker, subjects.AGENT_CMD_CANCEL_RUN,
                                 CancelRunV1(session_id=session_id, owner=requester.sub, run_id=run_id,
                                             assertion=vouched),
                                 durable=True, timeout=30)
        finally:
            await broker.stop()

    reply = asyncio.run(cancel_at_the_agent())

    assert reply.ok and reply.data["pending_ids"] == [pending["pending_id"]]
    def decided() -> dict | None:
        record = approver.get(f"/v1/approvals/{pending['pending_id']}").json()
        return record if record["status"] != "pending" else None

    record = wait_for(decided)
    assert (record["status"], record["decided_by"]) == ("withdrawn", requester.sub)
    events = requester.events(session_id, until=lambda evs: any(
        e["type"] == "tool_finished" and e["data"]["call_id"] == pending["call_id"] for e in evs))
    finished = next(e["data"] for e in events if e["type"] == "tool_finished"
                    and e["data"]["call_id"] == pending["call_id"])
    assert (finished["outcome"], finished["error"]["code"]) == ("not_executed", "withdrawn")
    assert pending["pending_id"] not in [a["pending_id"] for a in approver.get("/v1/approvals").json()["items"]]


def test_the_decision_answer_says_for_the_decider_whether_they_may_still_decide(requester: Api, approver: Api):
    _, _, pending = waiting_submit(requester)
    before = approver.get(f"/v1/approvals/{pending['pending_id']}").json()
    assert (before["can_decide"], before["cannot_decide_reason"]) == (True, None)

    decided = approver.post(f"/v1/approvals/{pending['pending_id']}/decision",
                            {"action": "approve", "fingerprint": pending["fingerprint"]})

    assert decided.status_code == 200, decided.text
    record = decided.json()
    assert record["status"] == "approved"
    assert (record["can_decide"], record["cannot_decide_reason"]) == (False, "already_decided")
    after = approver.get(f"/v1/approvals/{pending['pending_id']}").json()
    assert (after["can_decide"], after["cannot_decide_reason"]) == (False, "already_decided")


def test_only_a_waiting_run_of_your_own_can_be_cancelled(stack, requester: Api):
    session_id = requester.new_session()
    finished = start_run(requester, session_id, "find product pen")
    run_events(requester, session_id, finished)

    over = requester.post(f"/v1/sessions/{session_id}/runs/{finished}/cancel")
    assert over.status_code == 409 and over.json()["code"] == "run_not_waiting"
    stranger = Api(stack.base_url, "someone-else", "requester")
    assert stranger.post(f"/v1/sessions/{session_id}/runs/{finished}/cancel").status_code == 404
    assert requester.post(f"/v1/sessions/{session_id}/runs/run_unknown/cancel").status_code == 404


def test_the_session_list_is_yours_newest_first_searchable_and_paged(stack, requester: Api):
    made = []
    for title in ("Paper for Acme", "Pens for Globex", "paper again", None):
        response = requester.post("/v1/sessions", {"title": title} if title else {})
        made.append(response.json()["session_id"])
    Api(stack.base_url, "someone-else", "requester").post("/v1/sessions", {"title": "Paper elsewhere"})

    items = requester.get("/v1/sessions").json()["items"]
    assert [i["session_id"] for i in items] == list(reversed(made))
    assert items[-1]["title"] == "Paper for Acme" and "created_at" in items[0]
    found = requester.get("/v1/sessions", q="PAPER").json()["items"]
    assert [i["title"] for i in found] == ["paper again", "Paper for Acme"]
    assert requester.get("/v1/sessions", q="%").json()["items"] == []  # a literal, not a pattern

    seen, cursor = [], None
    while True:
        page = requester.get("/v1/sessions", limit=3, **({"cursor": cursor} if cursor else {})).json()
        seen += [i["session_id"] for i in page["items"]]
        if not (cursor := page["next_cursor"]):
            break
    assert seen == list(reversed(made))
    bad = requester.get("/v1/sessions", cursor="not-a-cursor")
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_cursor"
    beyond = cursors.encode(datetime.fromisoformat("0001-01-01T00:00:00+01:00"), "ses_x")  # no UTC for its time
    bad_time = requester.get("/v1/sessions", cursor=beyond)
    assert (bad_time.status_code, bad_time.json()["code"]) == (422, "invalid_datetime"), bad_time.text
    assert requester.get("/v1/sessions", limit=0).status_code == 422


def test_the_approval_list_filters_by_tool_requester_and_time(requester: Api, approver: Api):
    session_id, _run_id, pending = waiting_submit(requester)
    record = approver.get(f"/v1/approvals/{pending['pending_id']}").json()

    def listed(**filters) -> list[str]:
        response = approver.get("/v1/approvals", session_id=session_id, **filters)
        assert response.status_code == 200, response.text
        return [a["pending_id"] for a in response.json()["items"]]

    assert listed(tool="submit_order", requested_by=requester.sub) == [pending["pending_id"]]
    assert listed(tool="cancel_order") == [] and listed(requested_by="nobody") == []
    assert listed(since=record["created_at"]) == [pending["pending_id"]]
    assert listed(since="2999-01-01T00:00:00Z") == []
    naive = approver.get("/v1/approvals", since="2026-01-01T00:00:00")
    assert naive.status_code == 422 and naive.json()["code"] == "invalid_since"
    beyond = approver.get("/v1/approvals", since="9999-12-31T23:59:59-01:00")  # the year 10000 in UTC: was a 500
    assert (beyond.status_code, beyond.json()["code"]) == (422, "invalid_datetime"), beyond.text
    beyond_cursor = cursors.encode(datetime.fromisoformat("0001-01-01T00:00:00+01:00"), "pa_x")
    assert approver.get("/v1/approvals", cursor=beyond_cursor).json()["code"] == "invalid_datetime"
