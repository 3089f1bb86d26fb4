"""Escalation through HTTP on a stack with two approval processes (SPEC §10): an order nobody decided within
``escalate_after`` (2 s) may then be decided by a manager too: once (one ``approval_escalated`` on the session
stream, one audit row, one ``approval.escalated`` webhook), with its deadline unchanged, after a restart of every
approval process as well, and never once a decision was made."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from erpilot.stack.stack import free_port
from tests.e2e.conftest import Api, isolated_stack, serving, wait_for
from tests.e2e.test_write_flow import decide, draft, finished, request_write

pytestmark = pytest.mark.e2e
POLICY = """
[tools.submit_order]
roles = ["approver"]
ttl = "60s"
escalate_after = "2s"
escalate_to = "manager"
[tools.cancel_order]
ttl = "60s"
escalate_after = "8s"
escalate_to = "manager"
"""
APPROVAL_PROCESSES = ("approval", "approval-2")


class Receiver(ThreadingHTTPServer):
    """A webhook endpoint that takes everything and remembers it."""

    def __init__(self) -> None:
        self.got: list[dict] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", free_port()), _Handler)

    def escalations(self, pending_id: str) -> list[dict]:
        with self.lock:
            return [body for body in self.got if body["type"] == "approval.escalated"
                    and body["data"]["pending_id"] == pending_id]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with self.server.lock:
            self.server.got.append({**body, "webhook_id": self.headers["webhook-id"]})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def receiver():
    with serving(Receiver()) as server:
        yield server


@pytest.fixture(scope="module")
def escalating_stack(database_url, tmp_path_factory, receiver):
    hooks = [{"url": f"http://127.0.0.1:{receiver.server_address[1]}/hook", "secret": "e2e-escalation-secret-0123",
              "events": ["approval.escalated"]}]
    with isolated_stack(database_url, tmp_path_factory.mktemp("escalation-stack"),
                        {"ERPILOT_WEBHOOKS": json.dumps(hooks)}, replicas={"approval": 2}, policy=POLICY) as stack:
        yield stack


def people(stack) -> tuple[Api, Api, Api, Api]:
    stamp = time.monotonic_ns()
    return (Api(stack.base_url, f"req-{stamp}", "requester"), Api(stack.base_url, f"appr-{stamp}", "approver"),
            Api(stack.base_url, f"mgr-{stamp}", "manager"), Api(stack.base_url, f"adm-{stamp}", "admin"))


def order(requester: Api) -> tuple[str, dict]:
    session_id = requester.new_session()
    revision = draft(requester, session_id, [("SKU-PAPER-A4", 1)])
    return session_id, request_write(requester, session_id, "submit_order",
                                     {"draft_id": revision["draft_id"], "revision": revision["revision"]})


def escalation_rows(admin: Api, pending_id: str) -> list[dict]:
    return [row for row in admin.get("/v1/audit", pending_id=pending_id).json()["items"] if row["kind"] == "escalation"]


def stream(requester: Api, session_id: str, until_type: str, call_id: str) -> list[dict]:
    return requester.events(session_id, timeout=40, until=lambda evs: any(
        e["type"] == until_type and e["data"].get("call_id") == call_id for e in evs))


def test_an_undecided_order_escalates_once_to_managers_and_keeps_its_deadline(escalating_stack, receiver):
    requester, _, manager, admin = people(escalating_stack)
    session_id, pending = order(requester)
    early = decide(manager, pending, "approve")
    assert (early.status_code, early.json()["code"]) == (403, "forbidden")  # not yet a manager's

    events = stream(requester, session_id, "approval_escalated", pending["call_id"])
    [escalated] = [e["data"] for e in events if e["type"] == "approval_escalated"]
    assert (escalated["pending_id"], escalated["escalated_to"], escalated["required_roles"]) == (
        pending["pending_id"], "manager", ["approver", "manager"])
    assert datetime.fromisoformat(escalated["expires_at"]) == datetime.fromisoformat(pending["expires_at"])
    [listed] = [item for item in manager.get("/v1/approvals", session_id=session_id).json()["items"]]
    assert (listed["pending_id"], listed["can_decide"], listed["expires_at"]) == (
        pending["pending_id"], True, pending["expires_at"])
    assert listed["escalated_at"] is not None

    assert decide(manager, pending, "approve").status_code == 200
    assert finished(requester, session_id, pending["call_id"])["outcome"] == "succeeded"
    after = stream(requester, session_id, "tool_finished", pending["call_id"])
    # Two approval processes swept it: one escalation, in its place in the call's events.
    assert [e["type"] for e in after if e["data"].get("call_id") == pending["call_id"]] == [
        "tool_started", "approval_pending", "approval_escalated", "approval_resolved", "tool_executing",
        "tool_finished"]
    assert len(escalation_rows(admin, pending["pending_id"])) == 1
    delivered = wait_for(lambda: receiver.escalations(pending["pending_id"]), timeout=30)
    assert len({body["webhook_id"] for body in delivered}) == 1
    assert delivered[0]["data"]["escalated_to"] == "manager"


def test_a_decision_before_the_time_stands_and_nothing_escalates_after_it(escalating_stack, receiver):
    requester, approver, _, admin = people(escalating_stack)
    session_id, decided = order(requester)
    assert decide(approver, decided, "reject", comment="not this week").status_code == 200

    later_session, later = order(requester)  # asked after the decision, escalates after it: the sweepers ran
    stream(requester, later_session, "approval_escalated", later["call_id"])

    events = stream(requester, session_id, "tool_finished", decided["call_id"])
    assert [e["type"] for e in events if e["data"].get("call_id") == decided["call_id"]] == [
        "tool_started", "approval_pending", "approval_resolved", "tool_finished"]
    assert escalation_rows(admin, decided["pending_id"]) == []
    record = admin.get(f"/v1/approvals/{decided['pending_id']}").json()
    assert (record["status"], record["required_roles"], record["escalated_at"]) == ("rejected", ["approver"], None)
    wait_for(lambda: receiver.escalations(later["pending_id"]), timeout=30)
    assert receiver.escalations(decided["pending_id"]) == []


def test_an_escalation_due_while_every_approval_process_was_down_happens_once_after_the_restart(escalating_stack):
    requester, _, _, admin = people(escalating_stack)
    session_id = requester.new_session()
    pending = request_write(requester, session_id, "cancel_order", {"order_id": "O-5004", "reason": "test"})
    escalate_at = datetime.fromisoformat(admin.get(f"/v1/approvals/{pending['pending_id']}").json()["escalate_at"])
    for name in APPROVAL_PROCESSES:  # before its escalation time (8 s after the request)
        escalating_stack.supervisor.stop(name)
    try:
        assert datetime.now(UTC) < escalate_at, "stopping took longer than escalate_after: the test proves nothing"
        time.sleep((escalate_at - datetime.now(UTC)).total_seconds() + 1.0)  # due, nobody to sweep
    finally:
        restarted_at = datetime.now(UTC)
        for name in APPROVAL_PROCESSES:
            escalating_stack.supervisor.restart(name)
        escalating_stack.wait_ready()

    # A later order of the same session escalates after it (the sweepers take the earliest first): once its
    # escalation is on the stream, a second one of the cancellation would be too.
    revision = draft(requester, session_id, [("SKU-PAPER-A4", 1)])
    marker = request_write(requester, session_id, "submit_order",
                           {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    events = stream(requester, session_id, "approval_escalated", marker["call_id"])
    [escalated] = [e["data"] for e in events if e["type"] == "approval_escalated"
                   and e["data"]["call_id"] == pending["call_id"]]
    assert datetime.fromisoformat(escalated["escalated_at"]) >= restarted_at  # nobody escalated it while down
    assert len(escalation_rows(admin, pending["pending_id"])) == 1
    record = admin.get(f"/v1/approvals/{pending['pending_id']}").json()
    assert (record["status"], record["expires_at"], record["required_roles"]) == (
        "pending", pending["expires_at"], ["approver", "manager"])
