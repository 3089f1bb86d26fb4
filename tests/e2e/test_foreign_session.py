"""A draft and its order are the person's who created the draft, not whoever can get an assertion for the session
(security review, issue 27's medium finding "who owns a session is decided by the agent, or never checked").

Mallory posts a tool call to Alice's session: the gateway checks the owner before it signs (issue #32; by the
session id's MAC since the review of #32) and signs nothing for her. Should an assertion for Mallory in Alice's
session exist anyway, a compromised agent uses it, with ``requested_by: mallory``, straight on the ERP's subjects:
to read, edit and submit Alice's draft, and to read and cancel Alice's order. The ERP refuses each as
``not_found``, as for an id that does not exist, and stores nothing; Alice's own draft and order are as she left them.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import nats
import pytest

from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import ExecuteToolV1, PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.broker import create_broker, request
from erpilot_platform.grants import load_signing_key
from tests.e2e.conftest import Api
from tests.e2e.test_write_flow import draft, place_order

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def tool_call_requests(nats_url: str) -> AsyncIterator[list[dict]]:
    """Every ``req.agent.tool_call`` the gateway sends while open (a core request: no stream keeps them)."""
    connection = await nats.connect(nats_url)
    seen: list[dict] = []

    async def keep(message) -> None:
        seen.append(json.loads(message.data))

    await connection.subscribe(subjects.AGENT_REQ_TOOL_CALL, cb=keep)
    await connection.flush()
    try:
        yield seen
    finally:
        await connection.close()


async def signed_for(seen: list[dict], session_id: str, sub: str) -> bool:
    """Whether the gateway sent the agent a tool call of ``sub`` in ``session_id`` among ``seen``."""
    await asyncio.sleep(0.5)  # the requests sent during a blocking HTTP call are read once the loop runs again
    return any(body.get("session_id") == session_id and body.get("owner") == sub for body in seen)


async def test_an_assertion_for_another_person_in_the_owners_session_reads_edits_and_submits_nothing(
        stack, approver: Api, admin: Api):
    alice = Api(stack.base_url, f"alice-{time.monotonic_ns()}", "requester")
    mallory = Api(stack.base_url, f"mallory-{time.monotonic_ns()}", "requester")
    session_id = alice.new_session()
    order = place_order(alice, approver, session_id, [("SKU-PAPER-A4", 1)])
    revision = draft(alice, session_id, [("SKU-PAPER-A4", 2)])
    draft_id = revision["draft_id"]

    # Mallory in Alice's session: the gateway checks the owner before it signs (#32) and signs nothing for her.
    async with tool_call_requests(stack.nats_url) as sent:
        refused = mallory.call(session_id, "get_draft", {"draft_id": draft_id})
        assert refused.status_code == 404, refused.text
        assert not await signed_for(sent, session_id, mallory.sub)
        assert alice.call(session_id, "get_draft", {"draft_id": draft_id}).status_code == 200  # the watch sees
        assert await signed_for(sent, session_id, alice.sub)

    # Say an assertion for Mallory in Alice's session exists anyway (a gateway bug, a key leak): the ERP's owner
    # rule still holds. Signed here with the gateway's key for one run, whose calls are ``<run>:*``.
    key = load_signing_key(stack.env_for("gateway")[0]["ERPILOT_ASSERTION_SIGNING_KEY"])
    run = f"run_{uuid.uuid4().hex}"
    stolen = sign_assertion(key, sub=mallory.sub, roles=["requester"], session_id=session_id, run_id=run)
    agent = create_broker(stack.nats_url, "agent")
    await agent.connect()
    try:
        def tool(name: str, arguments: dict) -> ExecuteToolV1:
            return ExecuteToolV1(session_id=session_id, call_id=f"{run}:{uuid.uuid4().hex}",
                                 operation_id=f"op_{uuid.uuid4().hex}", tool=name,
                                 arguments=normalise(name, arguments), requested_by=mallory.sub, assertion=stolen)

        def prepare(name: str, arguments: dict) -> PrepareOperationV1:
            args = normalise(name, arguments)
            return PrepareOperationV1(operation_id=f"op_{uuid.uuid4().hex}", session_id=session_id,
                                      call_id=f"{run}:{uuid.uuid4().hex}", tool=name, arguments=args,
                                      fingerprint=fingerprint(name, 1, args), requested_by=mallory.sub,
                                      assertion=stolen)

        # The assertion itself is valid: a read that is no one's goes through.
        searched = await request(agent, subjects.ERP_QUERY_READ, tool("search_customers", {"query": "C-1001"}),
                                 durable=False)
        assert searched.ok and searched.data["outcome"] == "succeeded", searched

        for name, arguments in (("get_draft", {"draft_id": draft_id}), ("get_order", {"order_id": order["order_id"]})):
            reply = await request(agent, subjects.ERP_QUERY_READ, tool(name, arguments), durable=False)
            assert (reply.data["outcome"], reply.data["error"]["code"]) == ("business_rejected", "not_found"), reply
        task = await request(agent, subjects.ERP_QUERY_READ, tool("get_order_task", {}), durable=False)
        assert task.data["result"] == {"status": "none"}

        edited = await request(agent, subjects.ERP_REQ_DRAFT, tool("set_draft_note", {
            "draft_id": draft_id, "base_revision": revision["revision"], "note": "deliver to Mallory"}), durable=False)
        assert (edited.data["outcome"], edited.data["error"]["code"]) == ("business_rejected", "not_found"), edited

        forged = [prepare("submit_order", {"draft_id": draft_id, "revision": revision["revision"]}),
                  prepare("cancel_order", {"order_id": order["order_id"]})]
        for cmd in forged:
            reply = await request(agent, subjects.ERP_CMD_PREPARE, cmd, durable=True)
            assert (reply.ok, reply.error.code) == (False, "not_found"), reply
    finally:
        await agent.stop()

    # Nothing changed or was asked for: Alice's draft and order are as she left them, no operation, no approval.
    mine = alice.get(f"/v1/erp/drafts/{draft_id}").json()
    assert (mine["latest_revision"], mine["status"], mine["note"]) == (revision["revision"], "open", None)
    assert alice.get(f"/v1/erp/orders/{order['order_id']}").json()["status"] == "placed"
    for cmd in forged:
        assert admin.get(f"/v1/operations/{cmd.operation_id}").status_code == 404
    assert admin.get("/v1/approvals", requested_by=mallory.sub).json()["items"] == []
    # Over HTTP Mallory reads neither (the gateway decides by the ERP's owner, not by asking the agent).
    assert mallory.get(f"/v1/erp/drafts/{draft_id}").status_code == 404
    assert mallory.get(f"/v1/erp/orders/{order['order_id']}").status_code == 404
