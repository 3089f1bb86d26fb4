"""Giving up instead of retrying forever, seen from outside: with the ERP down, a tool-call command is
dead-lettered after its attempts (and replayed once by `erpilot dlq` when the ERP is back), and a
model run fails with `retries_exhausted` and a `run_failed` event.

A stack of its own (NATS and database), with small budgets: ERPILOT_DELIVERY_MAX_ATTEMPTS=3,
ERPILOT_RUN_MAX_ATTEMPTS=3, runs resumed after 1 s.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest

from erpilot.stack.stack import Stack
from tests.e2e.conftest import Api, isolated_stack, wait_for
from tests.e2e.test_model_runs import of_run, run_events, start_run

pytestmark = pytest.mark.e2e

TOOL_CALL_SUBJECT = "erpilot.v1.cmd.agent.tool_call"


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


def dlq(stack: Stack, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ERPILOT_NATS_URL": stack.nats_url}
    done = subprocess.run([sys.executable, "-m", "erpilot", "dlq", *args], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def dead_letters_of(stack: Stack, call_id: str) -> list[dict]:
    letters = json.loads(dlq(stack, "list", "--service", "agent", "--json").stdout)
    shown = [json.loads(dlq(stack, "show", str(d["seq"])).stdout) for d in letters
             if d["original_subject"] == TOOL_CALL_SUBJECT]
    return [d for d in shown if d["body"].get("call_id") == call_id]


def test_a_tool_call_whose_downstream_stays_down_is_dead_lettered_then_replayed_once(erp_down: Stack):
    stack = erp_down
    user = Api(stack.base_url, f"dlq-user-{secrets.token_hex(3)}", "requester")
    session_id = user.new_session()
    call_id = f"dlq-call-{secrets.token_hex(4)}"

    answer = user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id=call_id)

    assert answer.status_code == 503 and answer.json()["code"] == "service_unavailable", answer.text
    [letter] = wait_for(lambda: dead_letters_of(stack, call_id), timeout=30)
    assert letter["attempts"] == 3 and "gave up after 3 attempts" in letter["reason"]
    assert "ServiceUnavailable" in letter["reason"] and letter["replayed"] is None
    assert letter["body"]["tool"] == "get_product" and "reply_to" not in letter["headers"]
    assert user.get(f"/v1/sessions/{session_id}/tool-calls/{call_id}").json()["status"] != "finished"

    erp_back(stack)
    first = dlq(stack, "replay", str(letter["seq"]))
    assert f"{letter['seq']}: replayed to {TOOL_CALL_SUBJECT}" in first.stdout

    view = wait_for(lambda: (r := user.get(f"/v1/sessions/{session_id}/tool-calls/{call_id}")).status_code == 200
                    and r.json()["status"] == "finished" and r.json(), timeout=30)
    assert view["outcome"] == "succeeded" and view["result"]["sku"] == "SKU-PAPER-A4"
    again = dlq(stack, "replay", str(letter["seq"]))
    assert "already replayed, nothing published" in again.stdout
    [after] = dead_letters_of(stack, call_id)
    assert after["replayed"]["dead_letter_seq"] == letter["seq"]
    events = user.events(session_id, until=lambda evs: any(e["type"] == "tool_finished" for e in evs))
    assert [e["type"] for e in events if e["data"].get("call_id") == call_id] == ["tool_started", "tool_finished"]


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
