"""``erpilot mcp --stdio``: the gateway's MCP tools for a local client that launches a process.

The process is a client of the gateway like any other: it holds the gateway's URL (``ERPILOT_URL``) and
one person's bearer token (``ERPILOT_TOKEN``), and nothing else: no NATS credentials, no JWT secret, no
key. ``tools/list`` is ``GET /v1/tools``, ``tools/call`` is ``POST /v1/sessions/{sid}/tool-calls`` and
the status tool is ``GET /v1/sessions/{sid}/tool-calls/{call_id}``; the answers are shaped by the same
code as those of ``/mcp`` (``erpilot_gateway.mcp_server.server``), so the two transports offer the same
tools with the same schemas and answer alike. The gateway authenticates every request; a model with a
shell next to this process can do what the token allows through the API, and nothing more.

Every call of one process goes to one Erpilot session of the token's subject, created on first use
(``POST /v1/sessions``), unless the client names another in ``_meta``. Logs go to stderr.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import httpx
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from erpilot_gateway.mcp_server.server import ErpilotMcp
from erpilot_gateway.problems import Problem

SESSION_TITLE = "MCP session"
# A write's answer may wait for its approval to be recorded (the gateway's request timeout, 20 s by default).
TIMEOUT = httpx.Timeout(10.0, read=90.0)
_PROBLEM_MEMBERS = {"type", "title", "status", "detail", "code", "instance"}


class GatewayRefused(Exception):
    """The gateway cannot be reached, or refuses the token; the message says what to fix."""


class GatewayClient:
    """A ``ToolGate`` over the gateway's HTTP API, for the one token this process serves."""

    def __init__(self, http: httpx.AsyncClient):
        self.http = http
        self._session_id: str | None = None
        self._session_lock = asyncio.Lock()

    async def check_token(self) -> None:
        """Fail at start-up, not at the first call, when the URL or the token is wrong."""
        try:
            response = await self.http.get("/v1/tools")
        except httpx.HTTPError as exc:
            raise GatewayRefused(f"cannot reach the gateway at {self.http.base_url} (ERPILOT_URL): {exc}") from None
        if response.status_code in (401, 403):
            raise GatewayRefused(f"the gateway refused the token (ERPILOT_TOKEN): {_problem(response).detail}")
        if response.status_code != 200:
            raise GatewayRefused(f"{self.http.base_url}/v1/tools answered {response.status_code}: is ERPILOT_URL "
                                 "the gateway's URL?")

    async def catalogue(self, ctx: ServerRequestContext) -> list[dict[str, Any]]:
        return (await self._json("GET", "/v1/tools"))["items"]

    async def connection_session(self, ctx: ServerRequestContext) -> str:
        async with self._session_lock:  # concurrent first calls share one session
            if self._session_id is None:
                created = await self._json("POST", "/v1/sessions", json={"title": SESSION_TITLE})
                self._session_id = created["session_id"]
        return self._session_id

    async def start_call(self, ctx: ServerRequestContext, *, session_id: str, tool: str, arguments: dict[str, Any],
                         call_id: str) -> tuple[int, dict[str, Any]]:
        response = await self._send("POST", f"/v1/sessions/{_segment(session_id)}/tool-calls",
                                    json={"tool": tool, "arguments": arguments, "call_id": call_id})
        return response.status_code, response.json()

    async def call_view(self, ctx: ServerRequestContext, *, session_id: str, call_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/sessions/{_segment(session_id)}/tool-calls/{_segment(call_id)}")

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return (await self._send(method, path, **kwargs)).json()

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise Problem(503, "service_unavailable", f"the gateway did not answer: {exc!r}") from None
        if response.status_code >= 400:
            raise _problem(response)
        return response


def _segment(value: str) -> str:
    """One path segment: a ``/`` or ``?`` in an id must not reach another route."""
    return quote(value, safe="")


def _problem(response: httpx.Response) -> Problem:
    """The gateway's problem+json as the ``Problem`` it was raised from (its extra members included)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        extra = {key: value for key, value in body.items() if key not in _PROBLEM_MEMBERS}
        return Problem(response.status_code, body["code"], str(body.get("detail", "")), **extra)
    code = "service_unavailable" if response.status_code >= 500 else "unexpected_answer"
    return Problem(response.status_code, code, f"the gateway answered {response.status_code}: {response.text[:200]}")


async def serve_stdio(url: str, token: str) -> None:
    """Serve one MCP connection on stdin/stdout until the client closes it (raises GatewayRefused)."""
    headers = {"Authorization": f"Bearer {token}", "User-Agent": "erpilot-mcp-stdio"}
    async with httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=TIMEOUT) as http:
        gateway = GatewayClient(http)
        await gateway.check_token()
        mcp = ErpilotMcp(gateway)
        async with stdio_server() as (read_stream, write_stream):
            await mcp.server.run(read_stream, write_stream, mcp.server.create_initialization_options())
