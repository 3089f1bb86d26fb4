"""The MCP server: ``tools/list`` from the catalogue and policy, ``tools/call`` through the gateway's
tool-call pipeline (``erpilot_gateway.tool_calls``, the code path of ``POST /v1/sessions/{sid}/tool-calls``).

Nothing here decides anything: policy, validation, approval, fingerprint binding and the ledger's
checks all happen behind ``cmd.agent.tool_call``, exactly as for the HTTP API.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from erpilot_contracts import requests
from erpilot_contracts.agent.v1 import CreateSessionV1
from erpilot_gateway.auth import User
from erpilot_gateway.mcp_server.catalogue import STATUS_TOOL, mcp_tools
from erpilot_gateway.mcp_server.identity import InvalidMeta, call_id_for, derived_session_id, named_session_id
from erpilot_gateway.problems import Problem
from erpilot_gateway.routes.tools import tool_catalogue
from erpilot_gateway.services import Services
from erpilot_gateway.tool_calls import get_tool_call, start_tool_call, tool_call_answer
from erpilot_platform.broker import ServiceUnavailable

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Erpilot's ERP tools. Reads and drafts answer at once. A write that needs a person's approval answers at "
    "once with status awaiting_approval and an approval_url; nothing is executed until someone approves it. "
    f"Call {STATUS_TOOL} with the call_id to learn the outcome. Put a key in _meta['erpilot.dev/idempotency-key'] "
    "to make a retried call return the stored answer."
)


@dataclass(frozen=True)
class Caller:
    """Who sends an MCP request, and over which MCP connection."""

    user: User
    connection_key: str


CallerOf = Callable[[ServerRequestContext], Caller]


class ErpilotMcp:
    """One MCP server for every connection; each request names its caller through ``caller_of``."""

    def __init__(self, services: Services, caller_of: CallerOf):
        self.services = services
        self.caller_of = caller_of
        self._created: set[str] = set()  # sessions this process already created (creation is idempotent anyway)
        self.server: Server = Server("erpilot", version="1.0", instructions=INSTRUCTIONS,
                                     on_list_tools=self.list_tools, on_call_tool=self.call_tool)

    async def list_tools(self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        self.caller_of(ctx)
        catalogue = await tool_catalogue(self.services)
        return types.ListToolsResult(tools=mcp_tools(catalogue["items"]))

    async def call_tool(self, ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = self.caller_of(ctx)
        arguments = params.arguments if params.arguments is not None else {}
        try:
            session_id = await self._session(caller, params.meta)
            if params.name == STATUS_TOOL:
                return await self._status(caller, session_id, arguments)
            view = await start_tool_call(self.services, session_id=session_id, user=caller.user,
                                         tool=params.name, arguments=arguments,
                                         call_id=call_id_for(session_id, params.meta))
        except InvalidMeta as exc:
            return error_result(422, exc.code, str(exc))
        except Problem as exc:
            return error_result(exc.status, exc.code, exc.detail, **exc.extra)
        except ServiceUnavailable as exc:
            return error_result(503, "service_unavailable", str(exc))
        status, body = tool_call_answer(view)
        return call_result(session_id, status, body)

    async def _session(self, caller: Caller, meta: Any) -> str:
        """The named session (the agent checks it is the caller's), else this connection's own."""
        named = named_session_id(meta)
        if named is not None:
            return named
        session_id = derived_session_id(caller.user.sub, caller.connection_key)
        if session_id not in self._created:
            cmd = CreateSessionV1(session_id=session_id, owner=caller.user.sub, title="MCP session",
                                  assertion=self.services.vouch(caller.user, session_id))
            await self.services.data(requests.AGENT_CREATE_SESSION, cmd)
            if len(self._created) > 10_000:
                self._created.clear()
            self._created.add(session_id)
        return session_id

    async def _status(self, caller: Caller, session_id: str, arguments: dict[str, Any]) -> types.CallToolResult:
        call_id = arguments.get("call_id")
        if set(arguments) != {"call_id"} or not isinstance(call_id, str) or not 0 < len(call_id) <= 100:
            return error_result(422, "invalid_arguments", f"{STATUS_TOOL} takes exactly one string call_id")
        view = await get_tool_call(self.services, session_id=session_id, owner=caller.user.sub, call_id=call_id)
        keys = {"call_id", "tool", "status", "outcome", "result", "error", "pending_id", "fingerprint", "expires_at",
                "approval_url", "preview", "approval_status", "operation_id"}
        body = view.model_dump(mode="json", include=keys, exclude_none=True)
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
