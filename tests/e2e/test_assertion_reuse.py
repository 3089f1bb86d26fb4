"""Issue #32, the high finding, replayed under the deployed NATS permissions (`erpilot up --secure`): a requester
assertion is no credential for any write of its person.

Bob runs one read, `search_products`, through the gateway. The agent stores the gateway's assertion with the call
(`agent.tool_calls`). A client holding only the agent's NATS user (what a compromised agent holds) takes that
assertion and sends `cmd.erp.prepare` for `adjust_stock` −250 "requested by bob": under a call id of its own, and
under the read's own call id. Before #32 the ERP prepared it, an approval "requested by bob" appeared, and an
approver's decision moved the stock: Bob never asked for it. Now each is refused `invalid_message` with
`details.reason = "assertion_call_mismatch"`, dead-lettered with that reason, and nothing is stored: no operation,
no approval.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import nats
import pytest

from erpilot.ops.dlq import list_dead_letters
from erpilot.stack.nats_security import ADMIN
from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_platform.broker import create_broker, request
from tests.e2e.conftest import Api
from tests.e2e.test_nats_permissions import secure  # noqa: F401 (the fixture: a stack on least-privilege NATS)

pytestmark = pytest.mark.e2e
MISMATCH = {"reason": "assertion_call_mismatch"}


async def stored_assertion(database_url: str, session_id: str, call_id: str) -> str:
    """What the agent holds of Bob's read: the gateway's assertion stored with the call (agent schema)."""
    conn = await asyncpg.connect(database_url)
    try:
        found = await conn.fetchval("SELECT assertion FROM agent.tool_calls WHERE session_id = $1 AND call_id = $2",
                                    session_id, call_id)
    finally:
        await conn.close()
    assert found, "the read carries no assertion"
    return found


async def dead_lettered(secure_stack, operation_ids: set[str]) -> dict[str, str]:  # noqa: F811
    """The ERP's dead letters of those operations: operation id → reason (read as the NATS admin)."""
    admin = await nats.connect(secure_stack.server.url, user=ADMIN, password=secure_stack.passwords[ADMIN],
                               max_reconnect_attempts=0)
    try:
        letters = await list_dead_letters(admin.jetstream(), service="erp", limit=500)
    finally:
        await admin.close()
    return {letter.body["operation_id"]: letter.reason for letter in letters
            if isinstance(letter.body, dict) and letter.body.get("operation_id") in operation_ids
            and letter.original_subject == subjects.ERP_CMD_PREPARE}


async def test_the_assertion_of_a_read_taken_from_the_agent_cannot_prepare_a_write(secure):  # noqa: F811
    bob = Api(secure.stack.base_url, f"bob-{time.monotonic_ns()}", "requester")
    auditor = Api(secure.stack.base_url, f"auditor-{time.monotonic_ns()}", "admin", "approver", "manager")
    session_id = bob.new_session()
    read = bob.call(session_id, "search_products", {"query": "paper"})
    assert read.status_code == 200 and read.json()["outcome"] == "succeeded", read.text
    bobs = await stored_assertion(secure.stack.database_url, session_id, read.json()["call_id"])

    arguments = normalise("adjust_stock", {"sku": "SKU-PAPER-A4", "delta": -250, "reason": "count"})
    sent: list[str] = []
    agent = create_broker(secure.server.url, "agent", user="agent", password=secure.passwords["agent"])
    await agent.connect()
    try:
        for call_id in (f"call_{uuid.uuid4().hex}", read.json()["call_id"]):  # its own call id, then the read's
            cmd = PrepareOperationV1(operation_id=f"op_{uuid.uuid4().hex}", session_id=session_id, call_id=call_id,
                                     tool="adjust_stock", arguments=arguments,
                                     fingerprint=fingerprint("adjust_stock", 1, arguments), requested_by=bob.sub,
                                     assertion=bobs)
            reply = await request(agent, subjects.ERP_CMD_PREPARE, cmd, durable=True)
            sent.append(cmd.operation_id)
            assert not reply.ok, f"the ERP prepared {call_id} with the read's assertion"
            assert (reply.error.code, reply.error.details) == ("invalid_message", MISMATCH), reply
    finally:
        await agent.stop()

    letters: dict[str, str] = {}
    for _ in range(50):  # a deadline, not a synchronisation: the dead letter is written beside the answer
        if len(letters := await dead_lettered(secure, set(sent))) == len(sent):
            break
        await asyncio.sleep(0.2)
    assert set(letters) == set(sent)
    assert all(reason.startswith("invalid message: assertion_call_mismatch:") for reason in letters.values()), letters
    # Nothing stored: the ledger knows neither operation, and no approval appears in Bob's session.
    for operation_id in sent:
        assert auditor.get(f"/v1/operations/{operation_id}").status_code == 404
    for status in ("pending", "approved", "rejected", "expired", "withdrawn"):
        found = auditor.get("/v1/approvals", session_id=session_id, status=status)
        assert found.status_code == 200 and found.json()["items"] == [], (status, found.text)
