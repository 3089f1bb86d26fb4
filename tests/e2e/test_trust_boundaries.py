"""Trust boundaries (issue 10): what a person approves comes from the ledger, never from the agent, and
separation of duties holds across edits. The agent here is a compromised one: it sends its own
messages straight on NATS, with the agent's name, as a prompt injection or a bug could make it do."""

from __future__ import annotations

import uuid

import pytest
from faststream.nats import NatsBroker

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_gateway.console.views import money
from erpilot_platform.broker import create_broker, request
from tests.e2e.conftest import Api, wait_for
from tests.e2e.test_write_flow import call_events, decide, draft, finished, request_write

pytestmark = pytest.mark.e2e
BIG_ORDER = [("SKU-PRINTER-M404", 7), ("SKU-MONITOR-27", 14), ("SKU-MONITOR-24", 22), ("SKU-DOCK-USBC", 16)]


async def as_compromised_agent(nats_url: str) -> NatsBroker:
    broker = create_broker(nats_url, "agent")
    await broker.connect()
    return broker


async def test_a_forged_approval_request_cannot_lower_the_amount_or_invent_the_preview(
        stack, requester: Api, approver: Api, manager: Api):
    session_id = requester.new_session()
    revision = draft(requester, session_id, BIG_ORDER)
    assert revision["total_amount_minor"] >= 1_000_000  # a manager's decision under the default policy
    arguments = {"draft_id": revision["draft_id"], "revision": revision["revision"]}
    operation_id, call_id = f"op_{uuid.uuid4().hex}", f"call_{uuid.uuid4().hex}"
    print_ = fingerprint("submit_order", 1, arguments)

    agent = await as_compromised_agent(stack.nats_url)
    try:
        prepared = await request(agent, subjects.ERP_CMD_PREPARE, PrepareOperationV1(
            operation_id=operation_id, session_id=session_id, call_id=call_id, tool="submit_order",
            arguments=arguments, fingerprint=print_, requested_by=requester.sub), durable=True)
        assert prepared.ok, prepared
        ledger_preview = prepared.data["preview"]
        assert ledger_preview["amount_minor"] == revision["total_amount_minor"]

        forged = RequestApprovalV1(
            call_id=call_id, session_id=session_id, tool="submit_order", arguments=arguments, fingerprint=print_,
            operation_id=operation_id, requested_by=requester.sub,
            preview={"operation": "Submit order", "object": "Draft", "target": "A trusted customer",
                     "amount_minor": 1, "currency": "EUR", "notes": ["routine"]})
        reply = await request(agent, subjects.APPROVAL_CMD_REQUEST, forged, durable=True)
        assert (reply.ok, reply.error.code, reply.error.status) == (False, "invalid_request", 422)
        lowered = forged.model_copy(update={"preview": {**ledger_preview, "amount_minor": 1}})
        reply = await request(agent, subjects.APPROVAL_CMD_REQUEST, lowered, durable=True)
        assert (reply.ok, reply.error.code) == (False, "invalid_request")
        assert manager.get("/v1/approvals", session_id=session_id, status="pending").json()["items"] == []

        # Only a request that says what the ledger prepared is stored, and it shows the ledger's amount.
        honest = forged.model_copy(update={"preview": ledger_preview})
        reply = await request(agent, subjects.APPROVAL_CMD_REQUEST, honest, durable=True)
        assert reply.ok, reply
    finally:
        await agent.stop()
    pending_id = reply.data["pending_id"]
    record = manager.get(f"/v1/approvals/{pending_id}").json()
    assert record["preview"]["amount_minor"] == revision["total_amount_minor"]
    assert (record["required_roles"], record["risk"]) == (["manager"], "high")
    assert decide(approver, record, "approve").json()["code"] == "forbidden"
    page = manager.client.get(f"/resume/{pending_id}")
    assert page.status_code == 200 and money(revision["total_amount_minor"], "EUR") in page.text


def test_an_editor_is_a_party_and_may_not_approve_their_own_edit(stack, requester: Api, approver: Api):
    manager_a = Api(stack.base_url, f"mgr-a-{uuid.uuid4().hex[:6]}", "manager")
    manager_c = Api(stack.base_url, f"mgr-c-{uuid.uuid4().hex[:6]}", "manager")
    session_id = requester.new_session()
    revision = draft(requester, session_id, [("SKU-STAPLER", 2)])
    order = request_write(requester, session_id, "submit_order",
                          {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    assert decide(approver, order, "approve").status_code == 200
    placed = finished(requester, session_id, order["call_id"])["result"]

    refund = request_write(requester, session_id, "refund_payment", {
        "order_id": placed["order_id"], "amount_minor": 100, "currency": "EUR", "channel": "original"})
    edited = manager_a.post(f"/v1/approvals/{refund['pending_id']}/edit", {
        "fingerprint": refund["fingerprint"],
        "arguments": {"order_id": placed["order_id"], "amount_minor": placed["paid_minor"], "currency": "EUR",
                      "channel": "original"}})
    assert edited.status_code == 201, edited.text
    version = edited.json()
    assert (version["requested_by"], version["edited_by"]) == (requester.sub, manager_a.sub)

    own = decide(manager_a, version, "approve")
    assert (own.status_code, own.json()["code"]) == (403, "separation_of_duties")
    page = manager_c.client.get(f"/resume/{version['pending_id']}")
    assert page.status_code == 200 and manager_a.sub in page.text and 'id="edited-by"' in page.text
    assert decide(manager_c, version, "approve").status_code == 200

    view = finished(requester, session_id, refund["call_id"])
    assert view["outcome"] == "succeeded" and view["result"]["amount_minor"] == placed["paid_minor"]
    events = call_events(requester, session_id, refund["call_id"])
    superseded = [e["data"] for e in events if e["type"] == "approval_resolved" and e["data"]["status"] == "superseded"]
    assert [e["decided_by"] for e in superseded] == [manager_a.sub]  # the editor, never the requester
    pendings = [e["data"] for e in events if e["type"] == "approval_pending"]
    assert [p.get("edited_by") for p in pendings] == [None, manager_a.sub]
    assert wait_for(lambda: manager_c.get(f"/v1/approvals/{version['pending_id']}").json()["decided_by"]) == \
        manager_c.sub
