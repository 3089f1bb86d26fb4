"""The MCP tools inside the gateway (``/mcp``): the code paths of ``GET /v1/tools`` and
``POST|GET /v1/sessions/{sid}/tool-calls`` over NATS, for the caller the route authenticated."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext

from erpilot_contracts import requests
from erpilot_contracts.agent.v1 import CreateSessionV1
from erpilot_gateway.auth import User
from erpilot_gateway.catalogue import tool_catalogue
from erpilot_gateway.mcp_server.identity import derived_session_id
from erpilot_gateway.services import Services
from erpilot_gateway.tool_calls import get_tool_call, start_tool_call, tool_call_answer


@dataclass(frozen=True)
class Caller:
    """Who sends an MCP request, and over which MCP connection."""

    user: User
    connection_key: str


CallerOf = Callable[[ServerRequestContext], Caller]


class GatewayTools:
    """A ``ToolGate`` over the gateway's own NATS requests; ``caller_of`` names each request's caller."""

    def __init__(self, services: Services, caller_of: CallerOf):
        self.services = services
        self.caller_of = caller_of
        self._created: set[str] = set()  # sessions this process already created (creation is idempotent anyway)

    async def catalogue(self, ctx: ServerRequestContext) -> list[dict[str, Any]]:
        self.caller_of(ctx)
        return (await tool_catalogue(self.services))["items"]

    async def connection_session(self, ctx: ServerRequestContext) -> str:
        caller = self.caller_of(ctx)
        session_id = derived_session_id(caller.user.sub, caller.connection_key)
        if session_id not in self._created:
            cmd = CreateSessionV1(session_id=session_id, owner=caller.user.sub, title="MCP session")
            await self.services.call(requests.AGENT_CREATE_SESSION, cmd)
            if len(self._created) > 10_000:
                self._created.clear()
            self._created.add(session_id)
        return session_id

    async def start_call(self, ctx: ServerRequestContext, *, session_id: str, tool: str, arguments: dict[str, Any],
                         call_id: str) -> tuple[int, dict[str, Any]]:
        view = await start_tool_call(self.services, session_id=session_id, user=self.caller_of(ctx).user, tool=tool,
                                     arguments=arguments, call_id=call_id)
        return tool_call_answer(view)

    async def call_view(self, ctx: ServerRequestContext, *, session_id: str, call_id: str) -> dict[str, Any]:
        view = await get_tool_call(self.services, session_id=session_id, owner=self.caller_of(ctx).user.sub,
                                   call_id=call_id)
        return view.model_dump(mode="json")
