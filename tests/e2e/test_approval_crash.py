"""The approval service crashes at each of its failpoints (docs/FAILPOINTS.md) on the new write path: the ledger's
request arrives from the ERP's outbox, a decision sends ``cmd.erp.commit`` from the approval's own outbox, an
edit re-prepares through the ERP. After a restart every write ends with exactly one pending approval, one
decision and one ERP effect, and the session's events keep their order.

The stack runs alone (own NATS and database, rules model) so the armed approval replica is the only one. Each
redelivery waits for the JetStream ack wait (2 s here). Written against the merged redesign (issue 25): it needs the
ERP that outboxes ``cmd.approval.request`` and the agent that follows ``evt.erp.operation_finished``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from erpilot.stack.stack import Stack
from tests.e2e.conftest import Api, died_at_its_failpoint, isolated_stack, restart_armed, wait_for
from tests.e2e.test_write_flow import decide, draft, finished, request_write, stock

pytestmark = pytest.mark.e2e

SKU = "SKU-PAPER-A3"
REDELIVERED = 60.0  # ack wait (2 s) + restart + the rest of the write, with room for a loaded machine


@pytest.fixture(scope="module")
def crash_stack(database_url, tmp_path_factory) -> Iterator[Stack]:
    with isolated_stack(database_url, tmp_path_factory.mktemp("approval-crash-stack"),
                        # Redelivered 2 s after a crash (as torture runs); a request to the dying replica, or a
                        # 202 waiting for its approval_pending, gives up after 3 s instead of 20.
                        {"ERPILOT_ACK_WAIT_SECONDS": "2", "ERPILOT_REQUEST_TIMEOUT_SECONDS": "3"}) as stack:
        yield stack


def people(stack: Stack) -> tuple[Api, Api, Api]:
    stamp = time.monotonic_ns()
    return (Api(stack.base_url, f"req-{stamp}", "requester"), Api(stack.base_url, f"appr-{stamp}", "approver"),
            Api(stack.base_url, f"mgr-{stamp}", "manager"))


def call_events(requester: Api, session_id: str, call_id: str, until_type: str) -> list[dict]:
    events = requester.events(session_id, timeout=REDELIVERED, until=lambda evs: any(
        e["type"] == until_type and e["data"].get("call_id") == call_id for e in evs))
    return [e for e in events if e["data"].get("call_id") == call_id]


@pytest.mark.parametrize("failpoint", ["approval.request.before_db_commit", "approval.request.after_db_commit"])
def test_a_crash_around_storing_the_ledgers_request_still_asks_once(crash_stack: Stack, failpoint: str):
    requester, approver, _ = people(crash_stack)
    session_id = requester.new_session()
    revision = draft(requester, session_id, [(SKU, 1)])
    before = stock(requester, SKU)
    restart_armed(crash_stack, "approval", f"{failpoint}=crash")

    asked = requester.call(session_id, "submit_order", {"draft_id": revision["draft_id"],
                                                        "revision": revision["revision"]})
    assert asked.status_code == 202, asked.text
    call_id = asked.json()["call_id"]
    died_at_its_failpoint(crash_stack, "approval", timeout=30)
    restart_armed(crash_stack, "approval", None)

    events = call_events(requester, session_id, call_id, "approval_pending")
    [pending] = [e["data"] for e in events if e["type"] == "approval_pending"]
    assert decide(approver, pending, "approve").status_code == 200
    view = finished(requester, session_id, call_id, timeout=REDELIVERED)
    assert view["outcome"] == "succeeded", view
    types = [e["type"] for e in call_events(requester, session_id, call_id, "tool_finished")]
    assert types == ["tool_started", "approval_pending", "approval_resolved", "tool_executing", "tool_finished"]
    assert stock(requester, SKU) == before - 1  # exactly one effect


@pytest.mark.parametrize("failpoint", ["approval.decide.before_db_commit", "approval.decide.after_db_commit"])
def test_a_crash_around_the_decision_commits_once(crash_stack: Stack, failpoint: str):
    requester, approver, _ = people(crash_stack)
    session_id = requester.new_session()
    revision = draft(requester, session_id, [(SKU, 2)])
    before = stock(requester, SKU)
    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    restart_armed(crash_stack, "approval", f"{failpoint}=crash")

    assert decide(approver, pending, "approve").status_code != 200  # the replica died before answering
    died_at_its_failpoint(crash_stack, "approval", timeout=30)
    restart_armed(crash_stack, "approval", None)

    if failpoint == "approval.decide.before_db_commit":
        # Nothing was stored, and a decision is a core request (issue 31) that no stream delivers again: the
        # person's retry decides, once.
        retried = decide(approver, pending, "approve")
        assert retried.status_code == 200 and retried.json()["status"] == "approved", retried.text
    view = finished(requester, session_id, pending["call_id"], timeout=REDELIVERED)  # stored: the outbox sends it
    assert view["outcome"] == "succeeded", view
    again = decide(approver, pending, "approve")  # the person retries: the recorded decision
    assert again.status_code == 200 and again.json()["status"] == "approved"
    assert stock(requester, SKU) == before - 2  # one commit, one effect
    types = [e["type"] for e in call_events(requester, session_id, pending["call_id"], "tool_finished")]
    assert types.count("approval_resolved") == 1 and types.count("tool_finished") == 1


def test_a_crash_after_the_edit_intent_makes_one_new_version(crash_stack: Stack):
    requester, _, manager = people(crash_stack)
    other_manager = Api(crash_stack.base_url, f"mgr2-{time.monotonic_ns()}", "manager")
    session_id = requester.new_session()
    before = stock(requester, SKU)
    pending = request_write(requester, session_id, "adjust_stock", {"sku": SKU, "delta": -1, "reason": "count"})
    restart_armed(crash_stack, "approval", "approval.edit.after_intent=crash")

    edited = {"sku": SKU, "delta": -3, "reason": "count"}
    body = {"fingerprint": pending["fingerprint"], "arguments": edited}
    assert manager.post(f"/v1/approvals/{pending['pending_id']}/edit", body).status_code != 201
    died_at_its_failpoint(crash_stack, "approval", timeout=30)
    restart_armed(crash_stack, "approval", None)

    def new_version() -> dict | None:
        old = manager.get(f"/v1/approvals/{pending['pending_id']}").json()
        return old if old["status"] == "superseded" else None

    old = wait_for(new_version, timeout=REDELIVERED)  # the redelivered edit made it
    retry = manager.post(f"/v1/approvals/{pending['pending_id']}/edit", body)  # the person retries
    assert retry.status_code == 201 and retry.json()["pending_id"] == old["superseded_by"]
    new = retry.json()
    assert (new["arguments"], new["edited_by"]) == (edited, manager.sub)
    assert decide(other_manager, new, "approve").status_code == 200
    view = finished(requester, session_id, pending["call_id"], timeout=REDELIVERED)
    assert view["outcome"] == "succeeded", view
    assert stock(requester, SKU) == before - 3  # the edited operation, once
