"""A read tool call travels HTTP → gateway → agent → ERP → back, and shows on the session's stream."""

from __future__ import annotations

import pytest

from erpilot_contracts.tools.v1 import TOOLS
from tests.e2e.conftest import Api

pytestmark = pytest.mark.e2e


def test_stack_is_ready(stack):
    import httpx

    response = httpx.get(f"{stack.base_url}/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"broker": "ok", "agent": "ok", "approval": "ok", "erp": "ok"}


def test_read_tool_call_returns_the_erp_result_and_streams_its_events(requester: Api):
    session_id = requester.new_session()

    response = requester.call(session_id, "search_products", {"query": "ballpoint"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "finished" and body["outcome"] == "succeeded"
    assert [p["sku"] for p in body["result"]["items"]] == ["SKU-PEN-BLUE"]
    assert set(body["result"]["items"][0]) == {"sku", "name", "status", "price_minor", "currency", "on_hand"}
    events = requester.events(session_id, until=lambda evs: len(evs) >= 2)
    assert [(e["seq"], e["type"]) for e in events] == [(1, "tool_started"), (2, "tool_finished")]
    assert events[1]["data"]["call_id"] == body["call_id"]


def test_repeating_a_call_id_returns_the_same_answer_and_another_body_conflicts(requester: Api):
    session_id = requester.new_session()
    first = requester.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id="c-repeat-1")
    again = requester.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id="c-repeat-1")
    other = requester.call(session_id, "get_product", {"sku": "SKU-PAPER-A3"}, call_id="c-repeat-1")

    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"


def test_bad_input_gets_clear_problems_and_changes_nothing(requester: Api, stack):
    session_id = requester.new_session()

    unknown = requester.call(session_id, "drop_tables", {})
    wrong_type = requester.call(session_id, "get_product", {"sku": 42})
    extra_field = requester.post(f"/v1/sessions/{session_id}/tool-calls",
                                 {"tool": "get_product", "arguments": {"sku": "SKU-PAPER-A4"}, "sneaky": True})

    assert unknown.status_code == 422 and unknown.json()["code"] == "unknown_tool"
    assert unknown.headers["content-type"].startswith("application/problem+json")
    assert wrong_type.status_code == 422 and wrong_type.json()["code"] == "invalid_arguments"
    assert extra_field.status_code == 422 and extra_field.json()["code"] == "invalid_body"
    assert requester.get(f"/v1/sessions/{session_id}").json()["tool_calls"] == []


def test_auth_is_required_and_sessions_are_private(stack, requester: Api):
    import httpx

    session_id = requester.new_session()
    stranger = Api(stack.base_url, "someone-else", "requester")

    assert httpx.post(f"{stack.base_url}/v1/sessions", json={}).status_code == 401
    bad = httpx.post(f"{stack.base_url}/v1/sessions", json={}, headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and bad.json()["code"] == "unauthorized"
    assert stranger.get(f"/v1/sessions/{session_id}").status_code == 404
    assert stranger.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}).status_code == 404


def test_tool_catalog_lists_every_tool_with_its_policy(requester: Api):
    items = {t["name"]: t for t in requester.get("/v1/tools").json()["items"]}

    assert set(items) == set(TOOLS) and len(items) == 16  # the catalog's every tool, issue_credit_note included
    assert items["submit_order"]["kind"] == "write"
    assert items["submit_order"]["policy"] == {"action": "require_approval", "roles": ["approver", "manager"],
                                               "ttl": "15m"}
    assert items["search_products"]["policy"]["action"] == "allow"
    assert items["refund_payment"]["input_schema"]["properties"]["amount_minor"]["type"] == "integer"
