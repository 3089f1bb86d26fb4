"""Giving up instead of retrying forever, seen from outside: with the ERP down, a tool call (a core request the
gateway sends again until its timeout, issue 31) is answered 503 and runs once when its client sends it again
once the ERP is back, and a model run fails with `retries_exhausted` and a `run_failed` event.

A stack of its own (NATS and database), with small budgets: ERPILOT_DELIVERY_MAX_ATTEMPTS=3,
ERPILOT_RUN_MAX_ATTEMPTS=3, runs resumed after 1 s.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from erpilot.stack.stack import Stack
from tests.e2e.conftest import Api, isolated_stack
from tests.e2e.test_model_runs import of_run, run_events, start_run

pytestmark = pytest.mark.e2e

@pytest.fixture(scope="module")
def budget_stack(database_url, tmp_path_factory) -> Iterator[Stack]:
    env = {"ERPILOT_DELIVERY_MAX_ATTEMPTS": "3", "ERPILOT_RUN_MAX_ATTEMPTS": "3",
           "ERPILOT_RESUME_RUNS_AFTER_SECONDS": "1"}
    with isolated_stack(database_url, tmp_path_factory.mktemp("budget-stack"), env) as stack:
        yield stack


@pytest.fixture
def erp_down(budget_stack: Stack) -> Iterator[Stack]:
    """The ERP is stopped for the test and back (and the stack ready) afterwards."""
    budget_stack.supervisor.stop("erp")
    try:
        yield budget_stack
    finally:
        erp_back(budget_stack)


def erp_back(stack: Stack) -> None:
    if stack.supervisor.children["erp"].process.poll() is not None:
        stack.supervisor.restart("erp")
    stack.wait_ready()


def test_a_tool_call_whose_downstream_stays_down_is_answered_503_then_runs_once_when_sent_again(erp_down: Stack):
    stack = erp_down
    user = Api(stack.base_url, f"giveup-user-{secrets.token_hex(3)}", "requester")
    session_id = user.new_session()
    read_id, write_id = f"read-{secrets.token_hex(4)}", f"write-{secrets.token_hex(4)}"
    stock = {"sku": "SKU-PEN-BLUE", "delta": -1, "reason": "counted again"}

    read = user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id=read_id)
    write = user.call(session_id, "adjust_stock", stock, call_id=write_id)

    for answer in (read, write):
        assert answer.status_code == 503 and answer.json()["code"] == "service_unavailable", answer.text
    assert user.get(f"/v1/sessions/{session_id}/tool-calls/{read_id}").status_code == 404  # a read: nothing stored
    stored = user.get(f"/v1/sessions/{session_id}/tool-calls/{write_id}")  # a write: stored before the answer
    assert stored.status_code == 200 and stored.json()["status"] == "running", stored.text

    erp_back(stack)
    read_again = user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id=read_id)
    write_again = user.call(session_id, "adjust_stock", stock, call_id=write_id)

    assert read_again.status_code == 200 and read_again.json()["result"]["sku"] == "SKU-PAPER-A4", read_again.text
    assert write_again.status_code == 202 and write_again.json()["status"] == "awaiting_approval", write_again.text
    events = user.events(session_id, until=lambda evs: any(e["type"] == "approval_pending" for e in evs)
                         and any(e["type"] == "tool_finished" for e in evs))
    assert [e["type"] for e in events if e["data"].get("call_id") == read_id] == ["tool_started", "tool_finished"]
    assert [e["type"] for e in events if e["data"].get("call_id") == write_id] == ["tool_started",
                                                                                   "approval_pending"]


def test_a_run_whose_downstream_stays_down_fails_with_retries_exhausted(erp_down: Stack):
    stack = erp_down
    user = Api(stack.base_url, f"run-user-{secrets.token_hex(3)}", "requester")
    session_id = user.new_session()

    run_id = start_run(user, session_id, "show product SKU-PAPER-A4")  # the rules model calls get_product
    events = of_run(run_events(user, session_id, run_id, timeout=60), run_id)

    assert events[-1]["type"] == "run_failed", [e["type"] for e in events]
    error = events[-1]["data"]["error"]
    assert error["code"] == "retries_exhausted"
    assert "3 failed attempts" in error["message"] and "ServiceUnavailable" in error["message"]
    view = user.get(f"/v1/sessions/{session_id}").json()
    assert view["run_status"] == "failed" and view["runs"][0]["error"]["code"] == "retries_exhausted"

    erp_back(stack)  # the session takes messages again, and the next run works
    again = start_run(user, session_id, "show product SKU-PAPER-A4")
    assert run_events(user, session_id, again)[-1]["type"] == "run_finished"
