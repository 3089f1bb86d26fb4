"""The MCP server: ``tools/list`` and ``tools/call`` for the gated tools, the same wherever it runs.

Where the tools run is a ``ToolGate``: inside the gateway (``gateway_tools``: the code path of
``POST /v1/sessions/{sid}/tool-calls`` over NATS, for ``/mcp``), or behind the gateway's HTTP API
(``stdio``: a client with a bearer token and nothing else). Either way this module shapes the same
answers from the same HTTP answers. Nothing here decides anything: policy, validation, approval,
fingerprint binding and the ledger's checks all happen behind the gateway, exactly as for the HTTP API.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from erpilot_gateway.mcp_server.catalogue import STATUS_TOOL, mcp_tools
from erpilot_gateway.mcp_server.identity import InvalidMeta, call_id_for, named_session_id
from erpilot_gateway.problems import Problem

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Erpilot's ERP tools. Reads and drafts answer at once. A write that needs a person's approval answers at "
    "once with status awaiting_approval and an approval_url; nothing is executed until someone approves it. "
    f"Call {STATUS_TOOL} with the call_id to learn the outcome. Put a key in _meta['erpilot.dev/idempotency-key'] "
    "to make a retried call return the stored answer."
)
_STATUS_KEYS = ("call_id", "tool", "status", "outcome", "result", "error", "pending_id", "fingerprint", "expires_at",
                "approval_url", "preview", "approval_status", "operation_id")


class ToolGate(Protocol):
    """Erpilot as the caller of one MCP request sees it; every refusal is raised as a ``Problem``."""

    async def catalogue(self, ctx: ServerRequestContext) -> list[dict[str, Any]]:
        """The ``items`` of ``GET /v1/tools``."""
        ...

    async def connection_session(self, ctx: ServerRequestContext) -> str:
        """The Erpilot session of this MCP connection (created on first use), owned by the caller."""
        ...

    async def start_call(self, ctx: ServerRequestContext, *, session_id: str, tool: str, arguments: dict[str, Any],
                         call_id: str) -> tuple[int, dict[str, Any]]:
        """``POST /v1/sessions/{session_id}/tool-calls``: its status code and body."""
        ...

    async def call_view(self, ctx: ServerRequestContext, *, session_id: str, call_id: str) -> dict[str, Any]:
        """``GET /v1/sessions/{session_id}/tool-calls/{call_id}``."""
        ...


class ErpilotMcp:
    """One MCP server for every connection; ``gate`` runs each request's tools for its caller."""

    def __init__(self, gate: ToolGate):
        self.gate = gate
        self.server: Server = Server("erpilot", version="1.0", instructions=INSTRUCTIONS,
                                     on_list_tools=self.list_tools, on_call_tool=self.call_tool)

    async def list_tools(self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=mcp_tools(await self.gate.catalogue(ctx)))

    async def call_tool(self, ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments if params.arguments is not None else {}
        try:
            # The named session (the agent checks it is the caller's), else this connection's own.
            session_id = named_session_id(params.meta) or await self.gate.connection_session(ctx)
            if params.name == STATUS_TOOL:
                return await self._status(ctx, session_id, arguments)
            status, body = await self.gate.start_call(ctx, session_id=session_id, tool=params.name,
                                                      arguments=arguments, call_id=call_id_for(session_id, params.meta))
        except InvalidMeta as exc:
            return error_result(422, exc.code, str(exc))
        except Problem as exc:
            return error_result(exc.status, exc.code, exc.detail, **exc.extra)
        return call_result(session_id, status, body)

    async def _status(self, ctx: ServerRequestContext, session_id: str, arguments: dict[str, Any]
                      ) -> types.CallToolResult:
        call_id = arguments.get("call_id")
        if set(arguments) != {"call_id"} or not isinstance(call_id, str) or not 0 < len(call_id) <= 100:
            return error_result(422, "invalid_arguments", f"{STATUS_TOOL} takes exactly one string call_id")
        view = await self.gate.call_view(ctx, session_id=session_id, call_id=call_id)
        body = {k: view.get(k) for k in _STATUS_KEYS if view.get(k) is not None}
        return types.CallToolResult(content=[_text(body)], structured_content={"session_id": session_id, **body},
                                    is_error=False)


def call_result(session_id: str, status: int, body: dict[str, Any]) -> types.CallToolResult:
    """The HTTP answer as an MCP result: a waiting write is not an error, a failed or rejected call is."""
    structured = {"session_id": session_id, **body}
    failed = body["status"] == "finished" and body.get("outcome") != "succeeded"
    content = [_text(structured)]
    if body["status"] == "awaiting_approval":
        content.insert(0, types.TextContent(text=(
            f"Waiting for a person to approve (until {body['expires_at']}): {body['approval_url']} - "
            f"nothing has been executed yet; call {STATUS_TOOL} with call_id {body['call_id']} for the outcome.")))
    return types.CallToolResult(content=content, structured_content=structured, is_error=failed)


def error_result(status: int, code: str, message: str, **extra: Any) -> types.CallToolResult:
    """An error the calling model can read and act on (MCP tool errors travel in the result)."""
    error = {"code": code, "message": message, "status": status, **extra}
    return types.CallToolResult(content=[_text({"error": error})], structured_content={"error": error},
                                is_error=True)


def _text(value: dict[str, Any]) -> types.TextContent:
    return types.TextContent(text=json.dumps(value, default=str, ensure_ascii=False))
