"""The agent's reason (SPEC §11, issue 34): a write tool call may carry ``reason`` (at most 500 characters); the
approval shows it as ``agent_reason``, the agent's claim, outside the fingerprint of what is executed."""

from __future__ import annotations

import time

import pytest

from erpilot_contracts.fingerprint import fingerprint
from tests.e2e.conftest import Api
from tests.e2e.test_write_flow import draft

pytestmark = pytest.mark.e2e
REASON = "The customer asked for it by phone; it replaces the cancelled order O-1001."


def test_the_reason_shows_in_the_approval_and_leaves_the_fingerprint_alone(stack, approver):
    rita = Api(stack.base_url, f"rita-{time.monotonic_ns()}", "requester")
    session_id = rita.new_session()
    revision = draft(rita, session_id, [("SKU-PEN-BLUE", 1)])
    arguments = {"draft_id": revision["draft_id"], "revision": revision["revision"]}

    call = rita.call(session_id, "submit_order", arguments, reason=REASON)

    assert call.status_code == 202, call.text
    assert call.json()["fingerprint"] == fingerprint("submit_order", 1, arguments)  # the arguments' alone
    record = approver.get(f"/v1/approvals/{call.json()['pending_id']}").json()
    assert record["agent_reason"] == REASON
    assert REASON not in str(record["preview"]) and "reason" not in record["arguments"]


def test_a_reason_over_500_characters_is_422_and_starts_nothing(stack, approver):
    rita = Api(stack.base_url, f"rita-{time.monotonic_ns()}", "requester")
    session_id = rita.new_session()
    revision = draft(rita, session_id, [("SKU-PEN-BLUE", 1)])

    refused = rita.call(session_id, "submit_order", {"draft_id": revision["draft_id"],
                                                     "revision": revision["revision"]}, reason="x" * 501)

    assert (refused.status_code, refused.json()["code"]) == (422, "reason_too_long"), refused.text
    assert approver.get("/v1/approvals", session_id=session_id).json()["items"] == []
    assert rita.call(session_id, "submit_order", {"draft_id": revision["draft_id"], "revision": revision["revision"]},
                     reason="x" * 500).status_code == 202  # 500 is allowed
