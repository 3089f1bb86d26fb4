"""issue_credit_note through HTTP, on the shared stack: listed by GET /v1/tools, approved by a manager who is not
the requester, issued as CN-…, shown as a credit note on the stream and on the approval page; one over what is still
creditable (total less refunds and earlier credit notes) is refused at prepare, and at commit when another note
took the room while it waited."""

from __future__ import annotations

import time

import pytest

from erpilot_platform.testing.backends import fetch_sql
from tests.e2e.conftest import Api
from tests.e2e.test_write_flow import call_events, decide, finished, place_order, request_write

pytestmark = pytest.mark.e2e


def credit(order: dict, amount_minor: int) -> dict:
    return {"order_id": order["order_id"], "amount_minor": amount_minor, "currency": "EUR", "reason": "late delivery"}


def credit_notes(stack, order_id: str) -> list:
    return fetch_sql(stack.database_url, "select credit_note_id, amount_minor from erp.credit_notes "
                     "where order_id = $1 order by credit_note_id", order_id)


def test_the_catalog_lists_it_as_a_write_a_manager_approves(requester):
    tools = {item["name"]: item for item in requester.get("/v1/tools").json()["items"]}
    listed = tools["issue_credit_note"]
    assert listed["kind"] == "write"
    assert set(listed["input_schema"]["required"]) == {"order_id", "amount_minor", "currency", "reason"}
    assert (listed["policy"]["action"], listed["policy"]["roles"]) == ("require_approval", ["manager"])


def test_a_credit_note_is_approved_by_another_manager_and_shown_as_a_credit_note(stack, approver):
    both = Api(stack.base_url, f"req-mgr-{time.monotonic_ns()}", "requester", "manager")
    other_manager = Api(stack.base_url, f"mgr-{time.monotonic_ns()}", "manager")
    session_id = both.new_session()
    order = place_order(both, approver, session_id, [("SKU-BINDER-A4", 2)])

    pending = request_write(both, session_id, "issue_credit_note", credit(order, 300))
    record = other_manager.get(f"/v1/approvals/{pending['pending_id']}").json()
    assert (record["required_roles"], record["risk"]) == (["manager"], "high")
    assert decide(approver, pending, "approve").status_code == 403  # an approver is not a manager
    assert decide(both, pending, "approve").json()["code"] == "separation_of_duties"
    assert decide(other_manager, pending, "approve").status_code == 200

    result = finished(both, session_id, pending["call_id"])["result"]
    assert result["credit_note_id"].startswith("CN-")
    assert (result["amount_minor"], result["remaining_minor"]) == (300, order["total_amount_minor"] - 300)
    assert [(r["credit_note_id"], r["amount_minor"]) for r in credit_notes(stack, order["order_id"])] == [
        (result["credit_note_id"], 300)]

    [done] = [e for e in call_events(both, session_id, pending["call_id"]) if e["type"] == "tool_finished"]
    assert done["data"]["summary"].startswith(f"Credit note {result['credit_note_id']} of 3.00 EUR on order "
                                              f"{order['order_id']}")
    page = other_manager.client.get(f"/resume/{pending['pending_id']}")
    assert page.status_code == 200
    assert "Issue credit note" in page.text and f"Credit note {result['credit_note_id']}" in page.text


def test_over_the_remaining_is_refused_at_prepare_and_at_commit(stack, approver, manager):
    requester = Api(stack.base_url, f"req-{time.monotonic_ns()}", "requester")
    session_id = requester.new_session()
    order = place_order(requester, approver, session_id, [("SKU-STAPLES", 4)])
    total = order["total_amount_minor"]

    over = requester.call(session_id, "issue_credit_note", credit(order, total + 1))
    assert over.status_code == 200, over.text
    assert (over.json()["outcome"], over.json()["error"]["code"]) == ("business_rejected", "credit_exceeds_remaining")

    # two notes of 60 % each both fit when asked for; the second to commit no longer does
    first = request_write(requester, session_id, "issue_credit_note", credit(order, total * 6 // 10))
    second = request_write(requester, session_id, "issue_credit_note", credit(order, total * 6 // 10))
    assert decide(manager, first, "approve").status_code == 200
    assert finished(requester, session_id, first["call_id"])["outcome"] == "succeeded"
    assert decide(manager, second, "approve").status_code == 200
    view = finished(requester, session_id, second["call_id"])
    assert (view["outcome"], view["error"]["code"]) == ("business_rejected", "credit_exceeds_remaining")
    assert [r["amount_minor"] for r in credit_notes(stack, order["order_id"])] == [total * 6 // 10]
