"""Outgoing notifications end to end: a stack configured with ERPILOT_WEBHOOKS and a policy with
``warn_before`` notifies a local receiver (signed, retried after 500s) and puts ``approval_expiring``
on the session stream once, only for the approval still waiting."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from erpilot.stack.stack import free_port
from tests.e2e.conftest import Api, isolated_stack, serving, wait_for

pytestmark = pytest.mark.e2e
SECRET = "whsec_" + base64.b64encode(b"e2e-webhook-key-0123456789abcdef").decode()


class Receiver(ThreadingHTTPServer):
    """Answers 500 to the first two attempts of every webhook id, then 200; records every attempt."""

    def __init__(self, port: int):
        self.attempts: list[dict] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)

    def of(self, event_type: str, pending_id: str, status: int | None = None) -> list[dict]:
        with self.lock:
            return [a for a in self.attempts if a["payload"]["type"] == event_type
                    and a["payload"]["data"].get("pending_id") == pending_id and status in (None, a["status"])]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers["content-length"]))
        key = base64.b64decode(SECRET.removeprefix("whsec_"))
        signed = f"{self.headers['webhook-id']}.{self.headers['webhook-timestamp']}.".encode() + body
        expected = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        with self.server.lock:
            seen = sum(1 for a in self.server.attempts if a["id"] == self.headers["webhook-id"])
            status = 500 if seen < 2 else 200
            self.server.attempts.append({"id": self.headers["webhook-id"], "status": status,
                                         "valid": hmac.compare_digest(expected, self.headers["webhook-signature"]),
                                         "payload": json.loads(body)})
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def receiver():
    with serving(Receiver(free_port())) as server:
        yield server


@pytest.fixture(scope="module")
def hook_stack(database_url, tmp_path_factory, receiver):
    hooks = [{"url": f"http://127.0.0.1:{receiver.server_address[1]}/hook", "secret": SECRET}]
    env = {"ERPILOT_WEBHOOKS": json.dumps(hooks), "ERPILOT_WEBHOOK_RETRY_BASE_SECONDS": "0.2"}
    with isolated_stack(database_url, tmp_path_factory.mktemp("webhook-stack"), env,
                        policy='[tools.adjust_stock]\nttl = "60s"\nwarn_before = "52s"\n') as running:
        yield running


def test_approvers_hear_of_requests_and_deadlines_without_watching_the_console(hook_stack, receiver):
    requester = Api(hook_stack.base_url, f"wh-req-{time.monotonic_ns()}", "requester")
    manager = Api(hook_stack.base_url, f"wh-mgr-{time.monotonic_ns()}", "manager")
    session_id = requester.new_session()
    arguments = {"sku": "SKU-PAPER-A3", "delta": -2, "reason": "damaged in storage"}
    decided = requester.call(session_id, "adjust_stock", arguments).json()
    waiting = requester.call(session_id, "adjust_stock", {**arguments, "delta": -1}).json()
    assert decided["status"] == waiting["status"] == "awaiting_approval"
    assert manager.post(f"/v1/approvals/{decided['pending_id']}/decision",
                        {"action": "reject", "fingerprint": decided["fingerprint"]}).status_code == 200

    requested = wait_for(lambda: receiver.of("approval.requested", waiting["pending_id"], 200), timeout=30)
    attempts = receiver.of("approval.requested", waiting["pending_id"])
    assert [a["status"] for a in attempts] == [500, 500, 200] and all(a["valid"] for a in attempts)
    assert len({a["id"] for a in attempts}) == 1
    assert requested[0]["payload"]["text"] == (
        f"Stock change -1 on SKU-PAPER-A3 awaits a manager — approve: <{waiting['approval_url']}>")
    rejected = wait_for(lambda: receiver.of("approval.resolved", decided["pending_id"], 200), timeout=30)
    assert rejected[0]["payload"]["data"]["decided_by"] == manager.sub

    # 52 s before its 60 s deadline: about 8 s after the request, once, on the stream and to the receiver.
    events = requester.events(session_id, timeout=60, until=lambda evs: any(
        e["type"] == "approval_expiring" and e["data"]["pending_id"] == waiting["pending_id"] for e in evs))
    expiring = [e for e in events if e["type"] == "approval_expiring"]
    assert [e["data"]["call_id"] for e in expiring] == [waiting["call_id"]]  # the decided one is never warned
    assert datetime.fromisoformat(expiring[0]["data"]["expires_at"]) == datetime.fromisoformat(waiting["expires_at"])
    warned = wait_for(lambda: receiver.of("approval.expiring", waiting["pending_id"], 200), timeout=30)
    assert warned[0]["valid"] and receiver.of("approval.expiring", decided["pending_id"]) == []

    assert manager.post(f"/v1/approvals/{waiting['pending_id']}/decision",
                        {"action": "approve", "fingerprint": waiting["fingerprint"]}).status_code == 200
    finished = wait_for(lambda: receiver.of("operation.finished", waiting["pending_id"], 200), timeout=30)
    assert finished[0]["payload"]["text"] == "Stock change -1 on SKU-PAPER-A3 was carried out"
    again = requester.events(session_id, until=lambda evs: any(
        e["type"] == "tool_finished" and e["data"]["call_id"] == waiting["call_id"] for e in evs))
    assert sum(1 for e in again if e["type"] == "approval_expiring") == 1
