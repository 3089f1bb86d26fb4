"""Trust boundaries (issue 10): what a person approves comes from the ledger, never from the agent, and
separation of duties holds across edits. The agent here is a compromised one: it sends its own
messages straight on NATS, with the agent's name, as a prompt injection or a bug could make it do."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsBroker

from erpilot.ops.dlq import list_dead_letters
from erpilot_agent.domain.call_identity import call_key, operation_id_for
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_gateway.console.views import money
from erpilot_platform.broker import create_broker, request
from erpilot_platform.ledger_signatures import sign_request
from tests.e2e.conftest import Api, wait_for
from tests.e2e.test_forged_requester import assertion_of_alices_call
from tests.e2e.test_up_roles import session_roles
from tests.e2e.test_write_flow import call_events, decide, draft, finished, place_order, request_write

pytestmark = pytest.mark.e2e
BIG_ORDER = [("SKU-PRINTER-M404", 7), ("SKU-MONITOR-27", 14), ("SKU-MONITOR-24", 22), ("SKU-DOCK-USBC", 16)]
INVENTED_AMOUNT = 1


async def as_compromised_agent(nats_url: str) -> NatsBroker:
    broker = create_broker(nats_url, "agent")
    await broker.connect()
    return broker


async def test_the_approval_shows_the_ledgers_preview_and_a_request_the_gateway_did_not_vouch_for_is_refused(
        stack, requester: Api, approver: Api, manager: Api):
    """The request comes from the ledger's outbox, built from its own record (issue 25): what a person sees and
    the roles it needs are the ledger's. In the deployed configuration only the ERP may publish
    ``cmd.approval.request`` (test_nats_permissions); here, on a development stack without NATS users, a
    compromised agent's forged request carries no ledger signature and stores nothing, and its prepare names no
    one the gateway did not vouch for."""
    session_id = requester.new_session()
    revision = draft(requester, session_id, BIG_ORDER)
    assert revision["total_amount_minor"] >= 1_000_000  # a manager's decision under the default policy
    arguments = {"draft_id": revision["draft_id"], "revision": revision["revision"]}
    pending = request_write(requester, session_id, "submit_order", arguments)
    record = manager.get(f"/v1/approvals/{pending['pending_id']}").json()
    assert record["preview"]["amount_minor"] == revision["total_amount_minor"]
    assert (record["required_roles"], record["risk"], record["requested_by"]) == (["manager"], "high", requester.sub)
    assert decide(approver, record, "approve").json()["code"] == "forbidden"
    page = manager.client.get(f"/resume/{pending['pending_id']}")
    assert page.status_code == 200 and money(revision["total_amount_minor"], "EUR") in page.text

    operation_id, call_id = f"op_{uuid.uuid4().hex}", f"call_{uuid.uuid4().hex}"
    forged = RequestApprovalV1(
        call_id=call_id, session_id=session_id, tool="submit_order", arguments=arguments,
        fingerprint=fingerprint("submit_order", 1, arguments), operation_id=operation_id, requested_by="victim",
        preview={"operation": "Submit order", "object": "Draft", "target": "A trusted customer",
                 "amount_minor": 1, "currency": "EUR", "notes": ["routine"]})
    agent = await as_compromised_agent(stack.nats_url)
    try:
        reply = await request(agent, subjects.APPROVAL_CMD_REQUEST, forged, durable=True)
        assert (reply.ok, reply.error.code, reply.error.details["reason"]) == (
            False, "invalid_message", "ledger_signature_missing")
        reply = await request(agent, subjects.ERP_CMD_PREPARE, PrepareOperationV1(
            operation_id=operation_id, session_id=session_id, call_id=call_id, tool="submit_order",
            arguments=arguments, fingerprint=forged.fingerprint, requested_by="victim"), durable=True)
        assert (reply.ok, reply.error.code, reply.error.details["reason"]) == (
            False, "invalid_message", "assertion_missing")
    finally:
        await agent.stop()
    assert manager.get("/v1/approvals", session_id=session_id, requested_by="victim").json()["items"] == []


async def test_a_request_sent_before_the_ledgers_cannot_decide_what_the_approver_sees(
        stack, requester: Api, approver: Api, manager: Api):
    """Issue 25, found live on `erpilot up` (NATS without credentials on loopback, SPEC §7): a compromised agent
    sends ``cmd.approval.request`` for a real operation of Alice's before its own ``cmd.erp.prepare``, with her
    valid requester assertion (it holds it from her calls), the real operation id and fingerprint, and an invented
    preview (amount 1, which also lowers the role it needs). The ledger's own request would then have counted as a
    repeat of it. The approval service acts only on requests the ledger signed: the forgeries are dead-lettered,
    and the approval Alice's call gets shows the ledger's amount and needs a manager."""
    session_id = requester.new_session()
    revision = draft(requester, session_id, BIG_ORDER)
    total = revision["total_amount_minor"]
    assert total >= 1_000_000  # a manager's decision under the default policy; amount 1 is an approver's
    arguments = {"draft_id": revision["draft_id"], "revision": revision["revision"]}
    # What the agent knows of the call it is about to handle: its id, hence the operation id and the fingerprint.
    call_id = f"call_{uuid.uuid4().hex}"
    operation_id = operation_id_for(call_key(session_id, call_id))
    alices = await assertion_of_alices_call(stack.database_url, session_id)  # from her draft call
    now = datetime.now(UTC)
    invented = RequestApprovalV1(
        call_id=call_id, session_id=session_id, tool="submit_order", arguments=arguments,
        fingerprint=fingerprint("submit_order", 1, arguments), operation_id=operation_id,
        requested_by=requester.sub, assertion=alices, asserted_at=now, prepared_at=now,
        preview={"operation": "Submit order", "object": f"Draft {revision['draft_id']}",
                 "target": "A trusted customer", "amount_minor": INVENTED_AMOUNT, "currency": "EUR",
                 "notes": ["routine"]})
    forgeries = {"ledger_signature_missing": invented,
                 "ledger_signature_invalid": sign_request(invented, Ed25519PrivateKey.generate())}  # its own key
    agent = await as_compromised_agent(stack.nats_url)
    try:
        replies = {reason: await request(agent, subjects.APPROVAL_CMD_REQUEST, forged, durable=True)
                   for reason, forged in forgeries.items()}

        # Then the honest flow: Alice's call, under the call id the agent forged for; its prepare reaches the ERP.
        asked = requester.call(session_id, "submit_order", arguments, call_id=call_id)

        # What people see is the ledger's: the amount, the roles it needs, the page an approver opens.
        in_session = wait_for(lambda: manager.get("/v1/approvals", session_id=session_id).json()["items"])
        assert [(item["operation_id"], item["status"], item["preview"]["amount_minor"]) for item in in_session] == [
            (operation_id, "pending", total)]
        record = in_session[0]
        assert (record["required_roles"], record["risk"], record["requested_by"]) == (["manager"], "high",
                                                                                      requester.sub)
        assert decide(approver, record, "approve").json()["code"] == "forbidden"
        page = manager.client.get(f"/resume/{record['pending_id']}")
        assert page.status_code == 200 and money(total, "EUR") in page.text
        assert money(INVENTED_AMOUNT, "EUR") not in page.text
        # And Alice's call is answered as an honest call is: awaiting that approval, with the ledger's preview.
        assert asked.status_code == 202 and asked.json()["status"] == "awaiting_approval", asked.text
        pending = asked.json()
        assert (pending["call_id"], pending["pending_id"]) == (call_id, record["pending_id"])
        assert pending["preview"]["amount_minor"] == total

        # Each forgery was refused as a message the ledger did not sign, and dead-lettered with that reason.
        for reason, reply in replies.items():
            assert (reply.ok, reply.error.code, reply.error.details) == (False, "invalid_message",
                                                                         {"reason": reason}), reply
        js = agent.config.connection_state.stream
        letters = [letter for letter in await list_dead_letters(js, service="approval", limit=500)
                   if isinstance(letter.body, dict) and letter.body.get("operation_id") == operation_id]
        assert sorted(letter.reason.split(":")[1].strip() for letter in letters) == sorted(forgeries)
        assert {letter.original_subject for letter in letters} == {subjects.APPROVAL_CMD_REQUEST}
    finally:
        await agent.stop()


def test_an_editor_is_a_party_and_may_not_approve_their_own_edit(stack, requester: Api, approver: Api):
    manager_a = Api(stack.base_url, f"mgr-a-{uuid.uuid4().hex[:6]}", "manager")
    manager_c = Api(stack.base_url, f"mgr-c-{uuid.uuid4().hex[:6]}", "manager")
    session_id = requester.new_session()
    placed = place_order(requester, approver, session_id, [("SKU-STAPLER", 2)])

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


def process_env(stack, name: str) -> dict[str, str]:
    """The environment the running process ``name`` of the stack really has (Linux /proc)."""
    raw = Path(f"/proc/{stack.supervisor.children[name].pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def test_the_agent_process_holds_neither_the_signing_key_nor_the_jwt_secret(stack):
    agent, approval = process_env(stack, "agent"), process_env(stack, "approval")
    signing_key = approval["ERPILOT_GRANT_SIGNING_KEY"]
    assert "ERPILOT_GRANT_SIGNING_KEY" not in agent and "ERPILOT_AUTH_SECRET" not in agent
    assert not any(signing_key in value for value in agent.values())
    agent_dir = Path(agent["ERPILOT_DATA_DIR"])
    assert not [path for path in agent_dir.rglob("*") if path.is_file() and signing_key in path.read_text("latin-1")]
    assert urlsplit(agent["ERPILOT_DATABASE_URL"]).username == "erpilot_agent"


def test_each_service_connects_to_postgresql_as_its_own_role(stack):
    users = {urlsplit(process_env(stack, service)["ERPILOT_DATABASE_URL"]).username
             for service in ("agent", "approval", "erp")}
    assert users == {"erpilot_agent", "erpilot_approval", "erpilot_erp"}
    # Every connection, the approval service's dedicated LISTEN connection "erpilot-approval-deadlines" included.
    found = wait_for(lambda: (lambda s: s if len(s) >= 3 else None)(asyncio.run(session_roles(stack.database_url))),
                     timeout=30)
    assert found == {"agent": {"erpilot_agent"}, "approval": {"erpilot_approval"}, "erp": {"erpilot_erp"}}


@pytest.mark.parametrize("statement", [
    "INSERT INTO erp.consumed_grants (pending_id, operation_id) VALUES ('pa_forged', 'op_forged')",
    "UPDATE erp.products SET on_hand = 0",
    "INSERT INTO approval.decisions (pending_id, actor, action, fingerprint) VALUES ('pa_x', 'me', 'approve', 'f')",
    "UPDATE approval.approvals SET status = 'approved', decided_by = 'agent'",
    "SELECT count(*) FROM approval.approvals",
    "CREATE TABLE agent.sneaky (id int)",
    "UPDATE agent.alembic_version SET version_num = '0001'",
])
async def test_postgresql_refuses_the_agents_role_outside_its_own_schema(stack, statement):
    agent_url = process_env(stack, "agent")["ERPILOT_DATABASE_URL"]
    conn = await asyncpg.connect(agent_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM agent.sessions") >= 0  # its own schema works
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(statement)
    finally:
        await conn.close()
