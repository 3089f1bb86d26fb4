"""The identity of a tool call over HTTP (SPEC §5, §9): an ``Idempotency-Key`` (or a ``call_id``) names one
call of one session. The same key and body answer with that call, another body is 409
``idempotency_conflict``, and the same id in another session is another call that reveals nothing."""

from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import Api

pytestmark = pytest.mark.e2e
PEN = {"tool": "get_product", "arguments": {"sku": "SKU-PEN-BLUE"}}


def call(api: Api, session_id: str, body: dict, key: str | None = None):
    headers = {"Idempotency-Key": key} if key else {}
    return api.client.post(f"/v1/sessions/{session_id}/tool-calls", json=body, headers=headers)


def calls_of(api: Api, session_id: str) -> list[dict]:
    return api.get(f"/v1/sessions/{session_id}").json()["tool_calls"]


def test_the_same_key_and_body_answer_with_one_call_and_another_body_is_a_conflict(requester: Api):
    session_id = requester.new_session()
    key = f"k-{time.monotonic_ns()}"

    first = call(requester, session_id, PEN, key)
    again = call(requester, session_id, PEN, key)
    other = call(requester, session_id, {"tool": "get_product", "arguments": {"sku": "SKU-PAPER-A4"}}, key)

    assert first.status_code == again.status_code == 200 and first.json() == again.json()
    assert first.json()["call_id"] == key and first.json()["result"]["sku"] == "SKU-PEN-BLUE"
    assert other.status_code == 409 and other.headers["content-type"] == "application/problem+json"
    assert other.json()["code"] == "idempotency_conflict"
    assert [c["call_id"] for c in calls_of(requester, session_id)] == [key]


def test_a_retried_write_with_its_key_waits_for_one_approval(requester: Api, approver: Api):
    session_id = requester.new_session()
    body = {"tool": "cancel_order", "arguments": {"order_id": "O-5004", "reason": "retry test"}}

    first = call(requester, session_id, body, "cancel-once")
    again = call(requester, session_id, body, "cancel-once")

    assert first.status_code == again.status_code == 202
    assert again.json()["pending_id"] == first.json()["pending_id"]
    assert len(requester.get(f"/v1/sessions/{session_id}").json()["pending_approvals"]) == 1
    cancelled = approver.post(f"/v1/approvals/{first.json()['pending_id']}/decision",
                              {"action": "cancel", "fingerprint": first.json()["fingerprint"]})
    assert cancelled.status_code == 200  # leave nothing pending on the shared stack


def test_the_same_call_id_in_two_sessions_is_two_calls_and_never_a_conflict(stack, requester: Api):
    other_user = Api(stack.base_url, f"other-{time.monotonic_ns()}", "requester")
    mine, theirs, my_second = requester.new_session(), other_user.new_session(), requester.new_session()
    call_id = "shared-call-id"

    a = call(requester, mine, {**PEN, "call_id": call_id})
    b = call(other_user, theirs, {"tool": "get_product", "arguments": {"sku": "SKU-PAPER-A4"}, "call_id": call_id})
    c = call(requester, my_second, {"tool": "search_products", "arguments": {"query": "pen"}}, call_id)

    assert (a.status_code, b.status_code, c.status_code) == (200, 200, 200), (a.text, b.text, c.text)
    assert a.json()["result"]["sku"] == "SKU-PEN-BLUE" and b.json()["result"]["sku"] == "SKU-PAPER-A4"
    assert requester.get(f"/v1/sessions/{mine}/tool-calls/{call_id}").json()["arguments"] == PEN["arguments"]
    assert other_user.get(f"/v1/sessions/{theirs}/tool-calls/{call_id}").json()["arguments"] == {"sku": "SKU-PAPER-A4"}
    assert other_user.get(f"/v1/sessions/{mine}/tool-calls/{call_id}").status_code == 404
    assert requester.get(f"/v1/sessions/{my_second}/tool-calls/{call_id}").json()["tool"] == "search_products"
    assert requester.get(f"/v1/sessions/{mine}/tool-calls/not-{call_id}").status_code == 404
