"""The forged-requester sequence of issue 25, replayed as a compromised agent would (SPEC §10: a requester the agent
cannot forge).

On a running stack without NATS authentication (as plain `erpilot up` runs it), the agent's process may publish
anything. It holds every assertion the gateway gave it (each call's, in its own database) but no key to make one.
It tries to make "victim" the requester of a write in Alice's session:

1. `cmd.erp.prepare` for a real draft of Alice's session with `requested_by: "victim"`: with no assertion, with
   Alice's real assertion (taken from her own call), and with one signed by a key of its own;
2. `cmd.approval.request` straight to the approval service, with a well-formed record (the ledger's own record of
   an honest request of Alice's, the requester changed to "victim"), with the same three assertions. It holds no
   ledger key either, so none of them carries the ledger's signature, which the approval service checks first.

Each is refused `invalid_message` with `details.reason` naming the rule (the ERP: the assertion's; the approval
service: `ledger_signature_missing`), dead-lettered with that reason, and stores nothing: no operation in the
ledger, and no approval names "victim" (the approval service asked as an admin who holds every deciding role).
Alice's assertion naming Alice is refused too (`assertion_call_mismatch`, issue #32): it vouches for her draft
call, not for a write. An honest prepare, with the assertion the gateway signs for that very call, goes through:
the forgeries fail for their requester (and, at the approval service, for not being the ledger's), not for their
shape.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot.ops.dlq import list_dead_letters
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.broker import create_broker, request
from erpilot_platform.grants import load_signing_key
from tests.e2e.conftest import Api, wait_for
from tests.e2e.test_write_flow import draft

pytestmark = pytest.mark.e2e
VICTIM = "victim"


def refusal(reply) -> tuple[bool, str | None, dict | None]:
    """(ok, error code, error details) of a reply, whichever it is."""
    return reply.ok, reply.error.code if reply.error else None, reply.error.details if reply.error else None


async def assertion_of_alices_call(database_url: str, session_id: str) -> str:
    """What a compromised agent has at hand: the gateway's assertion stored with Alice's call (agent schema)."""
    conn = await asyncpg.connect(database_url)
    try:
        found = await conn.fetchval("SELECT assertion FROM agent.tool_calls WHERE session_id = $1 "
                                    "AND assertion IS NOT NULL ORDER BY created_at DESC LIMIT 1", session_id)
    finally:
        await conn.close()
    assert found, "Alice's call carries no assertion"
    return found


async def test_a_compromised_agent_cannot_make_anyone_else_the_requester(stack):
    alice = Api(stack.base_url, f"alice-{time.monotonic_ns()}", "requester")
    auditor = Api(stack.base_url, f"auditor-{time.monotonic_ns()}", "admin", "approver", "manager")
    session_id = alice.new_session()
    revision = draft(alice, session_id, [("SKU-PAPER-A4", 2)])
    arguments = {"draft_id": revision["draft_id"], "revision": revision["revision"]}
    print_ = fingerprint("submit_order", 1, arguments)
    alices = await assertion_of_alices_call(stack.database_url, session_id)
    own_key = sign_assertion(Ed25519PrivateKey.generate(), sub=VICTIM, roles=["requester", "manager"],
                             session_id=session_id, call_id=f"call_{uuid.uuid4().hex}", tool="submit_order")
    assertions = {"assertion_missing": None, "assertion_subject_mismatch": alices, "assertion_invalid": own_key}
    forged: list[tuple[str, str, str]] = []  # (service, operation_id, reason) of every forged message

    agent = create_broker(stack.nats_url, "agent")
    await agent.connect()
    try:
        def prepare(requested_by: str, assertion: str | None) -> PrepareOperationV1:
            return PrepareOperationV1(operation_id=f"op_{uuid.uuid4().hex}", session_id=session_id,
                                      call_id=f"call_{uuid.uuid4().hex}", tool="submit_order", arguments=arguments,
                                      fingerprint=print_, requested_by=requested_by, assertion=assertion)

        # 1. The ledger refuses to record "victim" as the requester.
        for reason, assertion in assertions.items():
            cmd = prepare(VICTIM, assertion)
            reply = await request(agent, subjects.ERP_CMD_PREPARE, cmd, durable=True)
            assert refusal(reply) == (False, "invalid_message", {"reason": reason}), reply
            forged.append(("erp", cmd.operation_id, reason))

        # The same assertion, naming the person it was given for, vouches for her draft call only (#32).
        reused = prepare(alice.sub, alices)
        reply = await request(agent, subjects.ERP_CMD_PREPARE, reused, durable=True)
        assert refusal(reply) == (False, "invalid_message", {"reason": "assertion_call_mismatch"}), reply
        forged.append(("erp", reused.operation_id, "assertion_call_mismatch"))

        # The gateway's assertion for this very call: the ledger records it and asks for approval.
        honest = prepare(alice.sub, None)
        gateway_key = load_signing_key(stack.env_for("gateway")[0]["ERPILOT_ASSERTION_SIGNING_KEY"])
        honest = honest.model_copy(update={"assertion": sign_assertion(
            gateway_key, sub=alice.sub, roles=["requester"], session_id=session_id, call_id=honest.call_id,
            tool=honest.tool)})
        reply = await request(agent, subjects.ERP_CMD_PREPARE, honest, durable=True)
        assert reply.ok, reply
        record = wait_for(lambda: next(iter(auditor.get("/v1/approvals", session_id=session_id).json()["items"]),
                                       None))
        assert (record["operation_id"], record["requested_by"]) == (honest.operation_id, alice.sub)

        # 2. Straight to the approval service: the ledger's own record, the requester changed to "victim".
        for assertion in assertions.values():
            cmd = RequestApprovalV1(
                call_id=f"call_{uuid.uuid4().hex}", session_id=session_id, tool="submit_order",
                arguments=record["arguments"], fingerprint=record["fingerprint"],
                operation_id=f"op_{uuid.uuid4().hex}", preview=record["preview"], requested_by=VICTIM,
                assertion=assertion, asserted_at=datetime.now(UTC), prepared_at=datetime.now(UTC))
            reply = await request(agent, subjects.APPROVAL_CMD_REQUEST, cmd, durable=True)
            # Not the ledger's request, whatever the assertion: refused before the requester is even looked at.
            assert refusal(reply) == (False, "invalid_message", {"reason": "ledger_signature_missing"}), reply
            forged.append(("approval", cmd.operation_id, "ledger_signature_missing"))

        # Every forged message is in the dead letters, with the rule it broke.
        js = agent.config.connection_state.stream
        letters = {(letter.service, letter.body.get("operation_id")): letter
                   for service in ("erp", "approval")
                   for letter in await list_dead_letters(js, service=service, limit=500)
                   if isinstance(letter.body, dict)}
        for service, operation_id, reason in forged:
            letter = letters.get((service, operation_id))
            assert letter is not None, f"{service} did not dead-letter {operation_id} ({reason})"
            assert letter.reason.startswith(f"invalid message: {reason}:"), letter.reason
            expected = subjects.ERP_CMD_PREPARE if service == "erp" else subjects.APPROVAL_CMD_REQUEST
            assert letter.original_subject == expected
    finally:
        await agent.stop()

    # Nothing stored: no approval names "victim", pending or otherwise; the ledger knows none of the operations.
    for status in ("pending", "approved", "rejected", "cancelled", "expired", "withdrawn", "superseded"):
        named = auditor.get("/v1/approvals", requested_by=VICTIM, status=status)
        assert named.status_code == 200 and named.json()["items"] == [], (status, named.text)
    in_session = auditor.get("/v1/approvals", session_id=session_id).json()["items"]
    assert [(item["operation_id"], item["requested_by"]) for item in in_session] == [(honest.operation_id, alice.sub)]
    for _, operation_id, _ in forged:
        assert auditor.get(f"/v1/operations/{operation_id}").status_code == 404
