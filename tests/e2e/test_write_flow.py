"""The life of a write, seen by the people using it (SPEC §3-§5): request → pending approval →
decision → commit (or not) → the outcome on the session's stream, through HTTP only."""

from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import Api, wait_for

pytestmark = pytest.mark.e2e


def draft(requester: Api, session_id: str, lines: list[tuple[str, int]], customer: str = "C-1001",
          note: str | None = None) -> dict:
    arguments = {"customer_id": customer, "lines": [{"sku": s, "qty": q} for s, q in lines]}
    if note is not None:
        arguments["note"] = note
    response = requester.call(session_id, "create_order_draft", arguments)
    assert response.status_code == 200 and response.json()["outcome"] == "succeeded", response.text
    return response.json()["result"]


def request_write(requester: Api, session_id: str, tool: str, arguments: dict) -> dict:
    response = requester.call(session_id, tool, arguments)
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "awaiting_approval"
    assert body["fingerprint"].startswith("sha256:") and body["approval_url"].endswith(f"/resume/{body['pending_id']}")
    return body


def decide(person: Api, pending: dict, action: str, comment: str | None = None, fingerprint: str | None = None):
    body = {"action": action, "fingerprint": fingerprint or pending["fingerprint"]}
    if comment is not None:
        body["comment"] = comment
    return person.post(f"/v1/approvals/{pending['pending_id']}/decision", body)


def finished(requester: Api, session_id: str, call_id: str, timeout: float = 20) -> dict:
    def check():
        view = requester.get(f"/v1/sessions/{session_id}/tool-calls/{call_id}").json()
        return view if view["status"] == "finished" else None

    return wait_for(check, timeout=timeout)


def place_order(requester: Api, decider: Api, session_id: str, lines: list[tuple[str, int]],
                customer: str = "C-1001") -> dict:
    """Draft, submit and approve an order; the committed result (with its ``order_id``)."""
    revision = draft(requester, session_id, lines, customer=customer)
    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    assert decide(decider, pending, "approve").status_code == 200
    view = finished(requester, session_id, pending["call_id"])
    assert view["outcome"] == "succeeded", view
    return view["result"]


def stock(api: Api, sku: str) -> int:
    return api.get(f"/v1/erp/products/{sku}").json()["on_hand"]


def call_events(requester: Api, session_id: str, call_id: str, until_type: str = "tool_finished") -> list[dict]:
    events = requester.events(session_id, until=lambda evs: any(
        e["type"] == until_type and e["data"].get("call_id") == call_id for e in evs))
    return [e for e in events if e["data"].get("call_id") == call_id]


def test_submit_order_approved_commits_once_and_the_stream_tells_approved_from_done(requester, approver):
    session_id = requester.new_session()
    revision = draft(requester, session_id, [("SKU-PAPER-A3", 2), ("SKU-MARKER-SET", 1)])
    before = stock(requester, "SKU-PAPER-A3")

    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    assert pending["preview"]["amount_minor"] == revision["total_amount_minor"]
    assert pending["preview"]["target"] == "Nordwind Logistik GmbH & Co. KG"
    response = decide(approver, pending, "approve")

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "approved" and response.json()["decided_by"] == approver.sub
    view = finished(requester, session_id, pending["call_id"])
    assert view["outcome"] == "succeeded"
    order = view["result"]
    assert order["status"] == "placed" and order["paid_minor"] == order["total_amount_minor"] == revision[
        "total_amount_minor"]
    assert stock(requester, "SKU-PAPER-A3") == before - 2
    types = [e["type"] for e in call_events(requester, session_id, pending["call_id"])]
    assert types == ["tool_started", "approval_pending", "approval_resolved", "tool_executing", "tool_finished"]
    again = decide(approver, pending, "approve")
    assert again.status_code == 200 and again.json()["decided_at"] == response.json()["decided_at"]
    assert stock(requester, "SKU-PAPER-A3") == before - 2


def test_reject_with_a_comment_is_not_executed_and_the_comment_reaches_the_stream(requester, approver):
    session_id = requester.new_session()
    revision = draft(requester, session_id, [("SKU-PAPER-A4", 3)])
    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})

    assert decide(approver, pending, "reject", comment="Customer asked to wait").status_code == 200

    view = finished(requester, session_id, pending["call_id"])
    assert view["outcome"] == "not_executed" and view["error"]["code"] == "rejected"
    resolved = [e for e in call_events(requester, session_id, pending["call_id"]) if e["type"] == "approval_resolved"]
    assert resolved[0]["data"]["status"] == "rejected"
    assert resolved[0]["data"]["comment"] == "Customer asked to wait"


def test_cancel_is_not_executed(requester, approver):
    session_id = requester.new_session()
    pending = request_write(requester, session_id, "cancel_order", {"order_id": "O-5004", "reason": "test"})
    assert "no refund" in " ".join(pending["preview"]["notes"]).lower()

    assert decide(approver, pending, "cancel").status_code == 200

    view = finished(requester, session_id, pending["call_id"])
    assert view["outcome"] == "not_executed" and view["error"]["code"] == "cancelled"
    assert requester.get("/v1/erp/orders/O-5004").json()["status"] == "placed"


def test_an_approval_expires_on_time_without_any_decision(requester, manager):
    session_id = requester.new_session()
    before = stock(requester, "SKU-COFFEE-1KG")
    pending = request_write(requester, session_id, "adjust_stock",
                            {"sku": "SKU-COFFEE-1KG", "delta": 5, "reason": "found a box"})

    view = finished(requester, session_id, pending["call_id"], timeout=15)

    assert view["outcome"] == "not_executed" and view["error"]["code"] == "expired"
    late = decide(manager, pending, "approve")
    assert late.status_code == 409 and late.json()["code"] == "expired"
    assert stock(requester, "SKU-COFFEE-1KG") == before


def test_decisions_need_the_right_role_and_the_fingerprint_shown(requester, approver, manager, stack):
    session_id = requester.new_session()
    pending = request_write(requester, session_id, "refund_payment", {
        "order_id": "O-5001", "amount_minor": 100, "currency": "EUR", "channel": "original"})

    wrong_role = decide(approver, pending, "approve")
    stale = decide(manager, pending, "approve", fingerprint="sha256:" + "0" * 64)
    not_an_action = manager.post(f"/v1/approvals/{pending['pending_id']}/decision",
                                 {"action": True, "fingerprint": pending["fingerprint"]})
    string_false = manager.post(f"/v1/approvals/{pending['pending_id']}/decision",
                                {"action": "false", "fingerprint": pending["fingerprint"]})
    extra = manager.post(f"/v1/approvals/{pending['pending_id']}/decision",
                         {"action": "approve", "fingerprint": pending["fingerprint"], "force": True})

    assert wrong_role.status_code == 403 and wrong_role.json()["code"] == "forbidden"
    assert stale.status_code == 409 and stale.json()["code"] == "stale_fingerprint"
    assert not_an_action.status_code == string_false.status_code == extra.status_code == 422
    assert manager.get(f"/v1/approvals/{pending['pending_id']}").json()["status"] == "pending"
    assert decide(manager, pending, "reject").status_code == 200
    second = decide(Api(stack.base_url, "other-manager", "manager"), pending, "approve")
    assert second.status_code == 409 and second.json()["code"] == "already_decided"


def test_a_price_change_while_waiting_makes_the_commit_fail_quote_changed(requester, approver, admin):
    session_id = requester.new_session()
    revision = draft(requester, session_id, [("SKU-STAPLER", 1)])
    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    price = requester.get("/v1/erp/products/SKU-STAPLER").json()["price_minor"]
    patched = admin.client.patch("/v1/erp/products/SKU-STAPLER", json={"price_minor": price + 100})
    assert patched.status_code == 200, patched.text

    assert decide(approver, pending, "approve").status_code == 200

    view = finished(requester, session_id, pending["call_id"])
    assert view["outcome"] == "business_rejected" and view["error"]["code"] == "quote_changed"
    operation = requester.get(f"/v1/operations/{view['operation_id']}").json()
    assert operation["status"] == "rejected" and operation["error"]["code"] == "quote_changed"


def test_refund_needs_a_manager_who_is_not_the_requester(stack, approver):
    both = Api(stack.base_url, f"req-mgr-{time.monotonic_ns()}", "requester", "manager")
    other_manager = Api(stack.base_url, f"mgr2-{time.monotonic_ns()}", "manager")
    session_id = both.new_session()
    order = place_order(both, approver, session_id, [("SKU-PEN-BLUE", 1)])

    refund = request_write(both, session_id, "refund_payment", {
        "order_id": order["order_id"], "amount_minor": 500, "currency": "EUR", "channel": "original"})
    own = decide(both, refund, "approve")
    assert own.status_code == 403 and own.json()["code"] == "separation_of_duties"
    assert decide(other_manager, refund, "approve").status_code == 200

    result = finished(both, session_id, refund["call_id"])["result"]
    assert result["amount_minor"] == 500 and result["remaining_minor"] == order["total_amount_minor"] - 500
    assert both.get(f"/v1/erp/orders/{order['order_id']}").json()["refunded_minor"] == 500


def test_cancel_order_returns_stock_and_refunds_nothing(requester, approver):
    session_id = requester.new_session()
    order = place_order(requester, approver, session_id, [("SKU-MOUSE-ERGO", 2)])
    after_order = stock(requester, "SKU-MOUSE-ERGO")

    cancel = request_write(requester, session_id, "cancel_order", {"order_id": order["order_id"]})
    decide(approver, cancel, "approve")

    cancelled = finished(requester, session_id, cancel["call_id"])["result"]
    assert cancelled["status"] == "cancelled" and cancelled["refunded_minor"] == 0
    assert stock(requester, "SKU-MOUSE-ERGO") == after_order + 2


def test_an_edit_supersedes_the_pending_approval_and_the_new_version_commits(stack, requester, approver):
    second = Api(stack.base_url, f"appr2-{time.monotonic_ns()}", "approver")  # the editor is a party (SPEC §10)
    session_id = requester.new_session()
    order = place_order(requester, approver, session_id, [("SKU-PAPER-A4", 1)])
    pending = request_write(requester, session_id, "cancel_order", {"order_id": order["order_id"], "reason": "dup"})

    edited = approver.post(f"/v1/approvals/{pending['pending_id']}/edit", {
        "fingerprint": pending["fingerprint"], "arguments": {"order_id": order["order_id"], "reason": "duplicate"}})

    assert edited.status_code == 201, edited.text
    new = edited.json()
    assert new["pending_id"] != pending["pending_id"] and new["fingerprint"] != pending["fingerprint"]
    assert new["arguments"]["reason"] == "duplicate" and new["status"] == "pending"
    assert approver.get(f"/v1/approvals/{pending['pending_id']}").json()["status"] == "superseded"
    old = decide(approver, pending, "approve")
    assert old.status_code == 409 and old.json()["code"] == "superseded"
    own = decide(approver, new, "approve")
    assert own.status_code == 403 and own.json()["code"] == "separation_of_duties"
    assert decide(second, new, "approve").status_code == 200
    view = finished(requester, session_id, pending["call_id"])
    assert view["outcome"] == "succeeded" and view["result"]["status"] == "cancelled"
    types = [(e["type"], e["data"].get("status")) for e in call_events(requester, session_id, pending["call_id"])]
    assert ("approval_resolved", "superseded") in types
    assert [t for t, _ in types].count("approval_pending") == 2
