"""The tool-call lifecycle: transitions, the SPEC §4 events they emit, replays and illegal moves."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from erpilot_agent.domain.tool_calls import CallState, IllegalTransition, PendingApproval, ToolCall

pytestmark = pytest.mark.unit

EXPIRES = datetime(2026, 10, 20, 10, 15, tzinfo=UTC)
ORDER = {"order_id": "O-1", "status": "submitted"}


def pending(pending_id: str = "P-1") -> PendingApproval:
    return PendingApproval(pending_id, f"sha256:{pending_id}", EXPIRES, {"operation": "Submit order"},
                           f"/resume/{pending_id}")


def write_call() -> ToolCall:
    return ToolCall("c1", "submit_order", {"draft_id": "D-1", "revision": 3})


def awaiting() -> ToolCall:
    call = write_call()
    call.start()
    call.await_approval(pending())
    return call


def types(events) -> list[str]:
    return [event.type for event in events]


def test_a_read_call_starts_running_and_finishes():
    call = ToolCall("c1", "get_product", {"sku": "S"})
    started = call.start()
    assert call.state == CallState.RUNNING
    assert [(e.type, e.data) for e in started] == [
        ("tool_started", {"call_id": "c1", "tool": "get_product", "arguments": {"sku": "S"}})]

    finished = call.finish("succeeded", result={"sku": "S"})

    assert [(e.type, e.data) for e in finished] == [
        ("tool_finished", {"call_id": "c1", "outcome": "succeeded", "result": {"sku": "S"}})]
    assert call.model_content() == {"status": "succeeded", "result": {"sku": "S"}}


def test_an_approved_write_emits_the_full_sequence():
    call = write_call()
    events = [*call.start(), *call.await_approval(pending()),
              *call.resolve("P-1", "approved", decided_by="alice"), *call.finish("succeeded", result=ORDER)]
    assert types(events) == ["tool_started", "approval_pending", "approval_resolved", "tool_executing",
                             "tool_finished"]
    assert events[1].data == {"call_id": "c1", "pending_id": "P-1", "fingerprint": "sha256:P-1",
                              "expires_at": "2026-10-20T10:15:00+00:00",
                              "preview": {"operation": "Submit order"}, "approval_url": "/resume/P-1"}
    assert events[2].data == {"call_id": "c1", "pending_id": "P-1", "status": "approved",
                              "decided_by": "alice"}
    assert call.state == CallState.FINISHED and call.outcome == "succeeded"


def test_a_rejection_finishes_not_executed_and_tells_the_model_the_comment():
    call = awaiting()
    events = call.resolve("P-1", "rejected", decided_by="bob", comment="price too low")
    assert types(events) == ["approval_resolved", "tool_finished"]
    assert events[1].data["outcome"] == "not_executed"
    assert events[1].data["error"]["code"] == "rejected"
    assert call.model_content() == {"status": "not_executed", "reason": "rejected",
                                    "comment": "price too low"}


@pytest.mark.parametrize("status", ["cancelled", "expired"])
def test_cancelled_and_expired_finish_not_executed(status):
    call = awaiting()
    assert types(call.resolve("P-1", status, decided_by=None)) == ["approval_resolved", "tool_finished"]
    assert call.model_content() == {"status": "not_executed", "reason": status}


def test_an_edit_supersedes_then_opens_a_new_pending_for_the_same_call():
    call = awaiting()
    events = call.supersede("P-1", pending("P-2"), decided_by="carol")
    assert [(e.type, e.data["call_id"], e.data["pending_id"]) for e in events] == [
        ("approval_resolved", "c1", "P-1"), ("approval_pending", "c1", "P-2")]
    assert events[0].data["status"] == "superseded"
    assert call.supersede("P-1", pending("P-2"), decided_by="carol") == []
    with pytest.raises(IllegalTransition):
        call.resolve("P-1", "approved", decided_by="alice")
    assert types(call.resolve("P-2", "approved", decided_by="alice")) == ["approval_resolved", "tool_executing"]


def test_replayed_transitions_are_no_ops():
    call = write_call()
    call.start()
    assert call.start() == []
    call.await_approval(pending())
    assert call.await_approval(pending()) == []
    call.resolve("P-1", "approved", decided_by="alice")
    assert call.resolve("P-1", "approved", decided_by="alice") == []
    call.finish("succeeded", result=ORDER)
    assert call.finish("succeeded", result=ORDER) == []
    assert call.resolve("P-1", "approved", decided_by="alice") == [] and call.await_approval(pending()) == []
    assert call.state == CallState.FINISHED


def test_a_replayed_rejection_emits_nothing_more():
    call = awaiting()
    call.resolve("P-1", "rejected", decided_by="bob", comment="no")
    assert call.resolve("P-1", "rejected", decided_by="bob", comment="no") == []


def test_a_second_different_decision_is_illegal():
    call = awaiting()
    call.resolve("P-1", "approved", decided_by="alice")
    with pytest.raises(IllegalTransition):
        call.resolve("P-1", "rejected", decided_by="bob")


def test_finishing_again_differently_is_illegal():
    call = ToolCall("c1", "get_product", {"sku": "S"})
    call.start()
    call.finish("succeeded", result={"sku": "S"})
    with pytest.raises(IllegalTransition):
        call.finish("failed", error={"code": "timeout", "message": "x"})


@pytest.mark.parametrize("move", [
    lambda c: c.finish("succeeded", result=ORDER),
    lambda c: c.resolve("P-9", "approved", decided_by="alice"),
    lambda c: c.await_approval(pending("P-2")),
    lambda c: c.supersede("P-9", pending("P-2"), decided_by="carol"),
])
def test_illegal_moves_while_awaiting_approval(move):
    with pytest.raises(IllegalTransition):
        move(awaiting())


def test_a_read_call_cannot_await_approval_or_execute():
    call = ToolCall("c1", "get_order_task", {})
    call.start()
    with pytest.raises(IllegalTransition):
        call.await_approval(pending())
    with pytest.raises(IllegalTransition):
        call.resolve("P-1", "approved", decided_by="alice")


def test_nothing_happens_before_start():
    call = write_call()
    with pytest.raises(IllegalTransition):
        call.finish("failed", error={"code": "x", "message": "y"})
    with pytest.raises(IllegalTransition):
        call.await_approval(pending())


def test_restarting_with_another_approval_requirement_is_illegal():
    call = write_call()
    call.start()
    with pytest.raises(IllegalTransition):
        call.start(needs_approval=False)


def test_outcome_and_payload_must_agree():
    call = ToolCall("c1", "get_product", {"sku": "S"})
    call.start()
    with pytest.raises(ValueError):
        call.finish("succeeded")
    with pytest.raises(ValueError):
        call.finish("business_rejected", result={})
    with pytest.raises(ValueError):
        call.resolve("P-1", "superseded", decided_by=None)


def test_a_policy_denial_during_prepare_is_not_executed():
    call = write_call()
    call.start()
    events = call.finish("not_executed", error={"code": "policy_denied", "message": "denied by policy"})
    assert types(events) == ["tool_finished"]
    assert call.model_content() == {"status": "not_executed", "reason": "policy_denied"}


def test_a_business_rejection_at_commit_reaches_the_model():
    call = awaiting()
    call.resolve("P-1", "approved", decided_by="alice")
    error = {"code": "stock_changed", "message": "on hand is 3, was 5"}
    assert call.finish("business_rejected", error=error)[0].data == {
        "call_id": "c1", "outcome": "business_rejected", "error": error}
    assert call.model_content() == {"status": "business_rejected", "error": error}


def test_a_draft_tool_can_be_made_to_need_approval_by_policy():
    call = ToolCall("c1", "create_order_draft", {"customer_id": "C-1", "lines": [{"sku": "S", "qty": 1}]})
    call.start(needs_approval=True)
    assert call.state == CallState.PREPARING


def test_the_view_status_uses_the_public_names():
    call = write_call()
    assert call.view_status == "received"
    call.start()
    assert call.view_status == "running"
    call.await_approval(pending())
    assert call.view_status == "awaiting_approval" and call.awaits_decision
    assert call.model_content() == {"status": "awaiting_approval", "pending_id": "P-1",
                                    "expires_at": "2026-10-20T10:15:00+00:00", "approval_url": "/resume/P-1"}
    call.resolve("P-1", "approved", decided_by="alice")
    assert call.view_status == "executing" and not call.awaits_decision


def test_a_withdrawn_approval_emits_approval_withdrawn_and_finishes_not_executed():
    call = awaiting()
    events = call.resolve("P-1", "withdrawn", decided_by="alice")
    assert types(events) == ["approval_withdrawn", "tool_finished"]
    assert events[0].data == {"call_id": call.call_id, "pending_id": "P-1", "withdrawn_by": "alice"}
    assert (events[1].data["outcome"], events[1].data["error"]["code"]) == ("not_executed", "withdrawn")
    assert call.model_content() == {"status": "not_executed", "reason": "withdrawn"}
    assert call.resolve("P-1", "withdrawn", decided_by="alice") == []  # a redelivery changes nothing
