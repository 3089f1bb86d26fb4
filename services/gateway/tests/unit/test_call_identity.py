"""The gateway fixes the identity of every tool call and message before it publishes the command (so a
redelivered or duplicated command names the same call): the body's ``call_id``, else the
``Idempotency-Key`` header, else a fresh id; a malformed key, or a key naming another call than the
body's ``call_id``, is refused before anything is sent.

The gateway runs in-process with the agent replaced by a fake that records every command.
"""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from erpilot_contracts import subjects

from .fake_services import RecordingServices, gateway_client, sending

pytestmark = pytest.mark.unit

SECRET = "gateway-test-secret-" + "y" * 32
CALL = {"tool": "get_product", "arguments": {"sku": "SKU-PEN-BLUE"}}


def answer(subject: str, payload: Any) -> dict:
    if subject == subjects.AGENT_QUERY_SESSION:  # the owner check before signing
        return {"session_id": payload.session_id, "owner": payload.owner, "created_at": "2026-10-01T12:00:00Z",
                "last_seq": 0, "run_status": "idle"}
    if subject == subjects.AGENT_CMD_POST_MESSAGE:
        return {"run_id": "run_1"}
    return {"call_id": payload.call_id, "session_id": payload.session_id, "tool": payload.tool,
            "arguments": payload.arguments, "status": "finished", "outcome": "succeeded",
            "result": {"sku": "SKU-PEN-BLUE"}}


AGENT = RecordingServices(answer)
CLIENT = gateway_client(AGENT, SECRET)
TOKEN = jwt.encode({"sub": "alice", "roles": ["requester"], "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")


def post(path: str, body: dict, **headers: str) -> tuple[Any, list[tuple[str, Any]]]:
    return sending(AGENT, lambda: CLIENT.post(path, json=body, headers={"Authorization": f"Bearer {TOKEN}", **headers}))


def test_a_tool_call_without_an_id_gets_one_before_it_is_published():
    first, [(subject, cmd)] = post("/v1/sessions/ses_1/tool-calls", CALL)
    second, [(_, other)] = post("/v1/sessions/ses_1/tool-calls", CALL)

    assert first.status_code == 200 and subject == subjects.AGENT_REQ_TOOL_CALL
    assert cmd.call_id.startswith("call_") and first.json()["call_id"] == cmd.call_id
    assert other.call_id != cmd.call_id  # without a key, every request is a call of its own


def test_the_idempotency_key_names_the_call_and_the_body_call_id_wins_only_when_they_agree():
    _, [(_, keyed)] = post("/v1/sessions/ses_1/tool-calls", CALL, **{"Idempotency-Key": "k-1"})
    _, [(_, both)] = post("/v1/sessions/ses_1/tool-calls", {**CALL, "call_id": "k-2"}, **{"Idempotency-Key": "k-2"})
    _, [(_, body_only)] = post("/v1/sessions/ses_1/tool-calls", {**CALL, "call_id": "c-3"})

    assert (keyed.call_id, both.call_id, body_only.call_id) == ("k-1", "k-2", "c-3")


@pytest.mark.parametrize("key", ["", "has space", "x" * 101, "a/b", "k\t1"])
def test_a_malformed_idempotency_key_is_refused_and_nothing_is_sent(key):
    for path, body in (("/v1/sessions/ses_1/tool-calls", CALL), ("/v1/sessions/ses_1/messages", {"text": "hi"})):
        response, sent = post(path, body, **{"Idempotency-Key": key})
        assert response.status_code == 422, (path, key, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "invalid_idempotency_key" and sent == []


def test_a_key_that_names_another_call_than_the_body_is_refused():
    response, sent = post("/v1/sessions/ses_1/tool-calls", {**CALL, "call_id": "c-1"}, **{"Idempotency-Key": "c-2"})
    assert response.status_code == 422 and response.json()["code"] == "invalid_idempotency_key" and sent == []


def test_a_message_is_named_by_its_key_or_a_fresh_id_before_it_is_published():
    _, [(_, keyed)] = post("/v1/sessions/ses_1/messages", {"text": "hi"}, **{"Idempotency-Key": "m-1"})
    _, [(_, fresh)] = post("/v1/sessions/ses_1/messages", {"text": "hi"})
    assert keyed.message_id == "m-1" and fresh.message_id.startswith("msg_")
