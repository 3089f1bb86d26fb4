"""The gateway reads every reply typed (``Services.call``), yet the HTTP bodies it passes on are what the service
sent, to the key and the value (SPEC §5, §9; docs/GUIDE.md): each answer below is built as the service builds it
(its contract model, dumped as ``ReplyV1.success`` does) and must come back from the route unchanged. The signed
audit rows are the one answer passed on unparsed: a field this gateway's contracts do not know survives.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest

from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import (
    PendingApprovalViewV1,
    RunViewV1,
    SessionMessageV1,
    SessionPageV1,
    SessionSummaryV1,
    SessionViewV1,
    ToolCallViewV1,
)
from erpilot_contracts.approval.v1 import ApprovalPageV1, ApprovalRecordV1, DecisionsV1, VoteV1
from erpilot_contracts.base import ErrorV1
from erpilot_platform.testing.previews import preview as a_preview

from .fake_services import RecordingServices, gateway_client

pytestmark = pytest.mark.unit

SECRET = "gateway-test-secret-" + "r" * 32
AT = datetime(2026, 10, 1, 12, 0, 7, 123456, tzinfo=UTC)
FINGERPRINT = "sha256:" + "cd" * 32


def _record(pending_id: str, **changes: Any) -> ApprovalRecordV1:
    return ApprovalRecordV1(
        **{"status": "pending", **changes}, pending_id=pending_id, call_id="call_1", session_id="ses_1",
        tool="submit_order",
        arguments={"draft_id": "D-1", "revision": 2}, fingerprint=FINGERPRINT, operation_id="op_1", risk="high",
        preview=a_preview(amount_minor=129900, currency="EUR", notes=["stock is short by 2"]),
        required_roles=["manager"], requested_by="alice", created_at=AT, expires_at=AT,
        policy_version="sha256:0011", approvals_required=2, approvals_received=1, can_decide=False,
        cannot_decide_reason="already_voted",
        votes=[VoteV1(sub="bob", role="manager", action="approve", at=AT, comment="fine")])


def _tool_call(call_id: str, **changes: Any) -> ToolCallViewV1:
    return ToolCallViewV1(call_id=call_id, session_id="ses_1", tool="adjust_stock",
                          arguments={"sku": "SKU-PEN-BLUE", "delta": -1, "reason": "r"}, created_at=AT,
                          updated_at=AT, **changes)


ANSWERS: dict[str, Any] = {
    subjects.AGENT_QUERY_SESSIONS: SessionPageV1(
        items=[SessionSummaryV1(session_id="ses_1", title="Quote", created_at=AT, last_seq=7, active_run_id="run_2"),
               SessionSummaryV1(session_id="ses_0", created_at=AT, last_seq=0)], next_cursor="WyJ4Il0"),
    subjects.AGENT_QUERY_SESSION: SessionViewV1(
        session_id="ses_1", owner="alice", title="Quote", created_at=AT, last_seq=7, run_status="waiting",
        active_run_id=None,
        runs=[RunViewV1(run_id="run_1", status="failed", error={"code": "context_overflow", "message": "m"},
                        created_at=AT)],
        messages=[SessionMessageV1(seq=1, role="user", text="Order 3 pens", run_id="run_1")],
        tool_calls=[_tool_call("call_1", status="finished", outcome="business_rejected",
                               error=ErrorV1(code="insufficient_stock", message="2 short", status=409)),
                    _tool_call("call_2", status="awaiting_approval", pending_id="pa_2", fingerprint=FINGERPRINT,
                               expires_at=AT, approval_url="http://x/resume/pa_2", preview=a_preview(amount_minor=5),
                               approval_status="pending"),
                    _tool_call("call_3", status="finished", outcome="succeeded",
                               result={"omitted": True, "reason": "result_too_large", "size_bytes": 20000,
                                       "limit_bytes": 16384, "href": "/v1/sessions/ses_1/tool-calls/call_3"})],
        pending_approvals=[PendingApprovalViewV1(call_id="call_2", pending_id="pa_2", fingerprint=FINGERPRINT,
                                                 expires_at=AT, approval_url="http://x/resume/pa_2",
                                                 preview=a_preview())]),
    subjects.APPROVAL_QUERY_LIST: ApprovalPageV1(items=[_record("pa_1"), _record("pa_0", edited_by="carol")],
                                                 next_cursor=None),
    subjects.APPROVAL_QUERY_GET: _record("pa_1"),
    subjects.APPROVAL_REQ_DECIDE: _record("pa_1", status="approved", decided_by="dave", decided_at=AT),
    subjects.APPROVAL_CMD_DECIDE_MANY: DecisionsV1(action="reject", items=[_record("pa_1", status="rejected")]),
    subjects.APPROVAL_CMD_EDIT: _record("pa_3", supersedes="pa_1", edited_by="dave"),
}
# As a service sends it: the contract model dumped as ``ReplyV1.success`` dumps it.
SENT = {subject: model.model_dump(mode="json") for subject, model in ANSWERS.items()}
AUDIT_ROWS = {"schema_version": 1, "items": [
    {"schema_version": 1, "seq": 4, "at": "2026-10-01T12:00:07.123456Z", "kind": "decided", "pending_id": "pa_1",
     "operation_id": "op_1", "actor": "dave", "data": {"action": "approve", "votes": [1, 2]},
     "prev_hash": "00" * 32, "hash": "ab" * 32, "signature": "c2ln", "on_behalf_of": "a newer service's field"}]}


def _answer(subject: str, payload: Any) -> dict:
    return AUDIT_ROWS if subject == subjects.APPROVAL_QUERY_AUDIT else SENT[subject]


@pytest.fixture(scope="module")
def client():
    return gateway_client(RecordingServices(_answer), SECRET)


def _headers() -> dict[str, str]:
    claims = {"sub": "dave", "roles": ["requester", "approver", "manager", "admin"], "exp": int(time.time()) + 600}
    return {"Authorization": f"Bearer {jwt.encode(claims, SECRET, algorithm='HS256')}"}


@pytest.mark.parametrize(("method", "path", "body", "subject"), [
    ("GET", "/v1/sessions", None, subjects.AGENT_QUERY_SESSIONS),
    ("GET", "/v1/sessions/ses_1", None, subjects.AGENT_QUERY_SESSION),
    ("GET", "/v1/approvals", None, subjects.APPROVAL_QUERY_LIST),
    ("GET", "/v1/approvals/pa_1", None, subjects.APPROVAL_QUERY_GET),
    ("POST", "/v1/approvals/pa_1/decision", {"action": "approve", "fingerprint": FINGERPRINT},
     subjects.APPROVAL_REQ_DECIDE),
    ("POST", "/v1/approvals/decisions", {"action": "reject", "items": [{"pending_id": "pa_1",
                                                                         "fingerprint": FINGERPRINT}]},
     subjects.APPROVAL_CMD_DECIDE_MANY),
    ("POST", "/v1/approvals/pa_1/edit", {"fingerprint": FINGERPRINT, "arguments": {"draft_id": "D-1", "revision": 3}},
     subjects.APPROVAL_CMD_EDIT),
])
def test_a_reply_read_typed_reaches_the_client_as_the_service_sent_it(client, method, path, body, subject):
    response = client.request(method, path, json=body, headers=_headers())
    assert response.status_code in (200, 201)
    assert response.json() == SENT[subject]
    assert list(response.json()) == list(SENT[subject])  # in the same order


def test_the_signed_audit_rows_are_passed_on_unparsed_with_a_field_this_gateway_does_not_know(client):
    response = client.get("/v1/audit", params={"pending_id": "pa_1"}, headers=_headers())
    assert response.status_code == 200 and response.json() == AUDIT_ROWS
