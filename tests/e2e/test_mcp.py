"""MCP (SPEC §9, §10) end to end: the SDK's own client drives the gateway's /mcp endpoint (Streamable HTTP)
and `erpilot mcp --stdio` (a client of the gateway's HTTP API, with only its URL and a token), against a
stack whose policy denies one tool."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import psutil
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


def stdio_server(stack, token_: str, cwd: Path) -> StdioServerParameters:
    """`erpilot mcp --stdio` as a desktop client starts it: the gateway's URL and a token, nothing else
    (the SDK adds only HOME, PATH, SHELL, TERM, USER, LOGNAME), in a directory with no data dir."""
    return StdioServerParameters(command=sys.executable, args=["-m", "erpilot", "mcp", "--stdio"],
                                 env={"ERPILOT_URL": stack.base_url, "ERPILOT_TOKEN": token_}, cwd=str(cwd))


def stdio_process() -> psutil.Process:
    [child] = [p for p in psutil.Process().children(recursive=True) if p.cmdline()[-2:] == ["mcp", "--stdio"]]
    return child


async def test_stdio_server_needs_only_the_gateway_url_and_a_token_and_speaks_http_to_it(mcp_stack, tmp_path):
    sub = f"mcp-stdio-{time.monotonic_ns()}"
    approver = Api(mcp_stack.base_url, f"mcp-stdio-appr-{time.monotonic_ns()}", "approver")
    async with Client(stdio_server(mcp_stack, token(sub, "requester"), tmp_path)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "get_product" in names and DENIED not in names
        read = structured(await client.call_tool("get_product", {"sku": "SKU-PAPER-A3"}))
        assert read["outcome"] == "succeeded" and read["result"]["sku"] == "SKU-PAPER-A3"
        draft = structured(await client.call_tool(
            "create_order_draft", {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A3", "qty": 1}]}))
        write = structured(await client.call_tool(
            "submit_order", {"draft_id": draft["result"]["draft_id"], "revision": draft["result"]["revision"]}))
        assert write["status"] == "awaiting_approval" and write["session_id"] == read["session_id"]
        assert (await wait_status(client, write["call_id"], "awaiting_approval"))["pending_id"] == write["pending_id"]

        # What the process holds: the two variables, no NATS credentials, no secret, no key; and it talks
        # to the gateway's HTTP port alone.
        child = stdio_process()
        environment = child.environ()
        assert {name for name in environment if name.startswith(("ERPILOT_", "NATS", "OPENAI"))} == {
            "ERPILOT_URL", "ERPILOT_TOKEN"}
        assert not [name for name, value in environment.items() if SECRET in value]
        peers = {c.raddr.port for c in child.net_connections(kind="inet") if c.raddr}
        assert peers == {mcp_stack.http_port}, (peers, mcp_stack.nats_url)
        assert not (tmp_path / ".erpilot").exists()

        decision = approver.post(f"/v1/approvals/{write['pending_id']}/decision",
                                 {"action": "approve", "fingerprint": write["fingerprint"]})
        assert decision.status_code == 200, decision.text
        done = await wait_status(client, write["call_id"], "finished")
        assert done["outcome"] == "succeeded" and done["result"]["status"] == "placed"

        named = Api(mcp_stack.base_url, sub, "requester").new_session()
        elsewhere = structured(await client.call_tool("get_product", {"sku": "SKU-PAPER-A3"},
                                                      meta={"erpilot.dev/session-id": named}))
        assert elsewhere["session_id"] == named
    owner = Api(mcp_stack.base_url, sub, "requester")
    view = owner.get(f"/v1/sessions/{read['session_id']}/tool-calls/{write['call_id']}").json()
    assert view["outcome"] == "succeeded"


async def test_stdio_and_streamable_http_offer_the_same_tools_and_answer_alike(mcp_stack, tmp_path):
    sub = f"mcp-same-{time.monotonic_ns()}"
    calls = [("set_draft_note", {"draft_id": "D-1", "base_revision": 1, "note": "x"}),  # denied
             ("drop_tables", {}),                                                     # unknown
             ("get_product", {"sku": "SKU-PAPER-A3", "extra": 1}),                    # invalid arguments
             ("get_product", {"sku": "SKU-NOPE"}),                                     # business rejection
             ("get_product", {"sku": "SKU-PAPER-A4"}),
             ("get_tool_call_status", {"call_id": "call_nobody_made"})]

    async def surface(client) -> tuple[list[dict], list[tuple[bool, dict]]]:
        tools = [tool.model_dump() for tool in (await client.list_tools()).tools]
        answers = []
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            body = {k: v for k, v in structured(result).items() if k not in ("session_id", "call_id")}
            answers.append((result.is_error, body))
        return tools, answers

    async with mcp_client(mcp_stack, sub, "requester") as client:
        over_http = await surface(client)
    async with Client(stdio_server(mcp_stack, token(sub, "requester"), tmp_path)) as client:
        over_stdio = await surface(client)
    assert over_stdio[0] == over_http[0]
    for (name, _), stdio_answer, http_answer in zip(calls, over_stdio[1], over_http[1], strict=True):
        assert stdio_answer == http_answer, name


@pytest.mark.parametrize(("environment", "message"), [
    ({}, "set ERPILOT_URL"),
    ({"ERPILOT_URL": "<base>"}, "set ERPILOT_TOKEN"),
    ({"ERPILOT_URL": "<base>", "ERPILOT_TOKEN": "not-a-jwt"}, "the gateway refused the token"),
    ({"ERPILOT_URL": "<base>", "ERPILOT_TOKEN": "<approver>"}, "requires one of the roles: requester"),
    ({"ERPILOT_URL": "http://127.0.0.1:9", "ERPILOT_TOKEN": "<requester>"}, "cannot reach the gateway"),
])
def test_stdio_server_says_what_to_fix_when_it_cannot_serve(mcp_stack, tmp_path, environment, message):
    values = {"<base>": mcp_stack.base_url, "<approver>": token("mcp-appr", "approver"),
              "<requester>": token("mcp-req", "requester")}
    env = {"PATH": os.environ.get("PATH", ""), **{k: values.get(v, v) for k, v in environment.items()}}
    done = subprocess.run([sys.executable, "-m", "erpilot", "mcp", "--stdio"], env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and message in done.stderr, done.stderr
