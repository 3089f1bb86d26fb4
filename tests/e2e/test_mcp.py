"""MCP (SPEC §9) end to end: the SDK's own client drives the gateway's /mcp endpoint (Streamable HTTP)
and `erpilot mcp --stdio`, against a stack whose policy denies one tool."""

from __future__ import annotations

import os
import sys
import time
from contextlib import asynccontextmanager

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import SECRET, Api, isolated_stack, token

pytestmark = pytest.mark.e2e
IDEMPOTENCY = "erpilot.dev/idempotency-key"
DENIED = "set_draft_note"


@pytest.fixture(scope="module")
def mcp_stack(database_url, tmp_path_factory):
    with isolated_stack(database_url, tmp_path_factory.mktemp("mcp-stack"), {},
                        policy=f'[tools.{DENIED}]\naction = "deny"\n') as running:
        yield running


@asynccontextmanager
async def mcp_client(stack, sub: str, *roles: str, mode: str = "auto"):
    headers = {"Authorization": f"Bearer {token(sub, *roles)}"}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60))
    async with http, Client(streamable_http_client(f"{stack.base_url}/mcp", http_client=http), mode=mode) as client:
        yield client


def structured(result) -> dict:
    assert result.structured_content is not None, result
    return result.structured_content


async def wait_status(client, call_id: str, status: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = structured(await client.call_tool("get_tool_call_status", {"call_id": call_id}))
        if body.get("status") == status:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"call {call_id} not {status} within {timeout}s: {body}")
        await anyio.sleep(0.2)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_list_read_draft_and_a_write_that_waits_for_an_approval_given_over_http(mcp_stack, mode):
    sub = f"mcp-req-{time.monotonic_ns()}"
    approver = Api(mcp_stack.base_url, f"mcp-appr-{time.monotonic_ns()}", "approver")
    rest_tools = Api(mcp_stack.base_url, sub, "requester").get("/v1/tools").json()["items"]
    async with mcp_client(mcp_stack, sub, "requester", mode=mode) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}

        # Same schemas as GET /v1/tools; the denied tool is absent; gated tools say so.
        for item in rest_tools:
            if item["name"] == DENIED:
                assert DENIED not in listed
                continue
            assert listed[item["name"]].input_schema == item["input_schema"]
        submit = listed["submit_order"]
        assert "Needs approval by one of: approver, manager" in submit.description
        assert submit.annotations.destructive_hint is True and submit.annotations.read_only_hint is False
        assert listed["get_product"].annotations.read_only_hint is True
        assert listed["get_product"].annotations.idempotent_hint is True
        assert listed["create_order_draft"].annotations.idempotent_hint is False
        assert listed["adjust_stock"].annotations.idempotent_hint is False
        assert submit.meta["erpilot.dev/policy"]["requires_approval"] is True
        assert "get_tool_call_status" in listed

        read = await client.call_tool("get_product", {"sku": "SKU-PAPER-A3"})
        assert read.is_error is False
        assert structured(read)["outcome"] == "succeeded"
        assert structured(read)["result"]["sku"] == "SKU-PAPER-A3"
        on_hand = structured(read)["result"]["on_hand"]
        session_id = structured(read)["session_id"]

        draft = await client.call_tool("create_order_draft",
                                       {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A3", "qty": 2}]})
        revision = structured(draft)["result"]
        assert structured(draft)["session_id"] == session_id  # one MCP session, one Erpilot session

        write = await client.call_tool("submit_order", {"draft_id": revision["draft_id"],
                                                        "revision": revision["revision"]})
        pending = structured(write)
        assert write.is_error is False and pending["status"] == "awaiting_approval"
        assert pending["approval_url"].endswith(f"/resume/{pending['pending_id']}")
        assert pending["preview"]["amount_minor"] == revision["total_amount_minor"] and pending["expires_at"]
        assert (await wait_status(client, pending["call_id"], "awaiting_approval"))["pending_id"] == pending[
            "pending_id"]

        decision = approver.post(f"/v1/approvals/{pending['pending_id']}/decision",
                                 {"action": "approve", "fingerprint": pending["fingerprint"]})
        assert decision.status_code == 200, decision.text

        done = await wait_status(client, pending["call_id"], "finished")
        assert done["outcome"] == "succeeded" and done["result"]["status"] == "placed"
    # The same call, seen through the HTTP API by its owner: the session is theirs.
    view = Api(mcp_stack.base_url, sub, "requester").get(f"/v1/sessions/{session_id}/tool-calls/{pending['call_id']}")
    assert view.status_code == 200 and view.json()["outcome"] == "succeeded"
    stock = Api(mcp_stack.base_url, sub, "requester").get("/v1/erp/products/SKU-PAPER-A3").json()["on_hand"]
    assert stock == on_hand - 2


async def test_a_denied_tool_is_refused_and_a_business_failure_is_an_error_result(mcp_stack):
    async with mcp_client(mcp_stack, f"mcp-deny-{time.monotonic_ns()}", "requester") as client:
        denied = await client.call_tool(DENIED, {"draft_id": "D-1", "base_revision": 1, "note": "x"})
        assert denied.is_error is True and structured(denied)["error"]["code"] == "policy_denied"
        unknown = await client.call_tool("drop_tables", {})
        assert unknown.is_error is True and structured(unknown)["error"]["code"] == "unknown_tool"
        invalid = await client.call_tool("get_product", {"sku": "SKU-PAPER-A3", "extra": 1})
        assert invalid.is_error is True and structured(invalid)["error"]["code"] == "invalid_arguments"
        missing = await client.call_tool("get_product", {"sku": "SKU-NOPE"})
        assert missing.is_error is True and structured(missing)["outcome"] == "business_rejected"


async def test_a_retry_with_the_same_idempotency_key_returns_the_stored_answer(mcp_stack):
    async with mcp_client(mcp_stack, f"mcp-idem-{time.monotonic_ns()}", "requester") as client:
        arguments = {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A3", "qty": 1}]}
        meta = {IDEMPOTENCY: f"k-{time.monotonic_ns()}"}
        first = structured(await client.call_tool("create_order_draft", arguments, meta=meta))
        again = structured(await client.call_tool("create_order_draft", arguments, meta=meta))
        assert again == first  # same call_id, same draft: no second draft
        other = structured(await client.call_tool("create_order_draft", arguments))
        assert other["call_id"] != first["call_id"] and other["result"]["draft_id"] != first["result"]["draft_id"]
        conflict = await client.call_tool("create_order_draft", {**arguments, "note": "changed"}, meta=meta)
        assert conflict.is_error is True and structured(conflict)["error"]["code"] == "idempotency_conflict"


async def test_the_endpoint_needs_a_valid_bearer_token_with_the_requester_role(mcp_stack):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(base_url=mcp_stack.base_url) as http:
        assert (await http.post("/mcp", json=body)).status_code == 401
        bad = await http.post("/mcp", json=body, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and bad.json()["code"] == "unauthorized"
        approver_only = await http.post("/mcp", json=body,
                                        headers={"Authorization": f"Bearer {token('mcp-appr', 'approver')}"})
        assert approver_only.status_code == 403 and approver_only.json()["code"] == "forbidden"


async def test_stdio_server_runs_the_same_pipeline(mcp_stack):
    sub = f"mcp-stdio-{time.monotonic_ns()}"
    env = {**os.environ, "ERPILOT_NATS_URL": mcp_stack.nats_url, "ERPILOT_AUTH_SECRET": SECRET,
           "ERPILOT_TOKEN": token(sub, "requester"), "ERPILOT_PUBLIC_URL": mcp_stack.base_url}
    params = StdioServerParameters(command=sys.executable, args=["-m", "erpilot", "mcp", "--stdio"], env=env)
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "get_product" in names and DENIED not in names
        read = structured(await client.call_tool("get_product", {"sku": "SKU-PAPER-A3"}))
        assert read["outcome"] == "succeeded" and read["result"]["sku"] == "SKU-PAPER-A3"
        draft = structured(await client.call_tool(
            "create_order_draft", {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A3", "qty": 1}]}))
        write = structured(await client.call_tool(
            "submit_order", {"draft_id": draft["result"]["draft_id"], "revision": draft["result"]["revision"]}))
        assert write["status"] == "awaiting_approval" and write["session_id"] == read["session_id"]
    owner = Api(mcp_stack.base_url, sub, "requester")
    assert owner.get(f"/v1/sessions/{read['session_id']}").json()["pending_approvals"][0]["call_id"] == write["call_id"]
