"""The chat card end to end (SPEC §11 "Approval channels", issue 34): a stack whose policy has [channels.chat] url
(a local receiver) and ERPILOT_CHAT_SIGNING_SECRET posts a Slack-compatible card for a write; a callback signed
Slack's v0 way approves it as the person whose chat_id pressed the button, the write commits, the card is
replaced with the outcome; a replayed, forged or unmapped callback is refused and records nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlencode

import httpx
import pytest

from erpilot.stack.stack import free_port
from tests.e2e.conftest import Api, isolated_stack, serving, wait_for

pytestmark = pytest.mark.e2e
SECRET = "e2e-chat-signing-secret-0123456789"


class Receiver(ThreadingHTTPServer):
    """The chat platform: keeps every message posted to the webhook (/hook) and to response URLs (/response)."""

    def __init__(self, port: int):
        self.posts: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)

    def at(self, path: str, text: str) -> list[dict]:
        with self.lock:
            return [body for where, body in self.posts if where == path and text in json.dumps(body)]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with self.server.lock:
            self.server.posts.append((self.path, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def receiver():
    with serving(Receiver(free_port())) as server:
        yield server


@pytest.fixture(scope="module")
def chat_stack(database_url, tmp_path_factory, receiver):
    base = f"http://127.0.0.1:{receiver.server_address[1]}"
    policy = (f'[channels.chat]\nurl = "{base}/hook"\n\n[people.chat-manager]\nroles = ["manager"]\n'
              'chat_id = "U-MANAGER"\n')
    with isolated_stack(database_url, tmp_path_factory.mktemp("chat-stack"), {"ERPILOT_CHAT_SIGNING_SECRET": SECRET},
                        policy=policy) as running:
        yield running


def callback(value: str, user: str, response_url: str, *, at: float | None = None, secret: str = SECRET):
    payload = {"type": "block_actions", "user": {"id": user}, "response_url": response_url,
               "actions": [{"action_id": "approve", "value": value}]}
    body = urlencode({"payload": json.dumps(payload)})
    timestamp = str(int(at if at is not None else time.time()))
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return body, {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature,
                  "Content-Type": "application/x-www-form-urlencoded"}


def test_a_signed_chat_callback_approves_and_the_card_shows_the_outcome(chat_stack, receiver):
    requester = Api(chat_stack.base_url, f"chat-req-{time.monotonic_ns()}", "requester")
    session_id = requester.new_session()
    write = requester.call(session_id, "adjust_stock", {"sku": "SKU-PAPER-A3", "delta": -1, "reason": "broken"},
                           reason="two boxes fell").json()
    pending_id = write["pending_id"]
    [card] = wait_for(lambda: receiver.at("/hook", pending_id), timeout=30)
    [actions] = [block for block in card["blocks"] if block["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == ["approve", "reject", "open"]
    assert "two boxes fell" in json.dumps(card) and "SKU-PAPER-A3" in json.dumps(card)
    value = actions["elements"][0]["value"]
    response_url = f"http://127.0.0.1:{receiver.server_address[1]}/response"
    manager = Api(chat_stack.base_url, "chat-manager", "manager")

    with httpx.Client(base_url=chat_stack.base_url, timeout=30) as slack:
        def send(body_headers):
            body, headers = body_headers
            return slack.post("/v1/channels/chat/actions", content=body, headers=headers)

        forged = send(callback(value, "U-MANAGER", response_url, secret="not-the-secret"))
        assert (forged.status_code, forged.json()["code"]) == (401, "invalid_signature")
        stale = send(callback(value, "U-MANAGER", response_url, at=time.time() - 301))
        assert (stale.status_code, stale.json()["code"]) == (401, "stale_request")
        stranger = send(callback(value, "U-SOMEONE", response_url))
        assert (stranger.status_code, stranger.json()["code"]) == (403, "unknown_chat_user")
        assert manager.get(f"/v1/approvals/{pending_id}").json()["status"] == "pending"  # nothing recorded

        signed = callback(value, "U-MANAGER", response_url)
        approved = send(signed)
        assert approved.status_code == 200 and approved.json()["status"] == "approved"
        replayed = send(signed)
        assert (replayed.status_code, replayed.json()["code"]) == (409, "already_voted")

    view = wait_for(lambda: (v := requester.get(f"/v1/sessions/{session_id}/tool-calls/{write['call_id']}").json())
                    ["status"] == "finished" and v, timeout=30)
    assert view["outcome"] == "succeeded"
    assert manager.get(f"/v1/approvals/{pending_id}").json()["decided_by"] == "chat-manager"
    [update] = wait_for(lambda: receiver.at("/response", "approved"), timeout=30)
    assert update["replace_original"] is True and "chat-manager" in update["text"]
