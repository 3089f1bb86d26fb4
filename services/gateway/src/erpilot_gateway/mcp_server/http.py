"""The Streamable HTTP transport at ``/mcp``: the bearer JWT of the HTTP API, then the SDK's session manager.

Every request is authenticated before the SDK sees it (no token or a bad one: 401 problem+json; no
``requester`` role: 403). The subject also becomes the owner of the SDK's transport session, so a
``Mcp-Session-Id`` presented with another subject's token is answered as unknown (404).
"""

from __future__ import annotations

import hashlib

from fastapi import FastAPI
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from erpilot_gateway.auth import TokenRules, User, decode_token, token_from
from erpilot_gateway.mcp_server.gateway_tools import Caller, GatewayTools
from erpilot_gateway.mcp_server.server import ErpilotMcp
from erpilot_gateway.problems import Problem, problem_response
from erpilot_gateway.services import Services

PATH = "/mcp"
MAX_BODY_BYTES = 1024 * 1024
_USER = "erpilot.user"
_TOKEN_KEY = "erpilot.token_key"


class McpHttp:
    """The ``/mcp`` route; ``run()`` must be entered for the app's lifetime (the SDK's task group)."""

    def __init__(self, services: Services, auth_secret: TokenRules):
        self.auth_secret = auth_secret
        self.mcp = ErpilotMcp(GatewayTools(services, http_caller))
        # The HTTP API's body limit (SPEC §9: 1 MiB) holds for MCP requests too.
        self.manager = StreamableHTTPSessionManager(app=self.mcp.server, max_request_body_size=MAX_BODY_BYTES)
        self._sdk = StreamableHTTPASGIApp(self.manager)

    def run(self):
        return self.manager.run()

    def install(self, app: FastAPI) -> None:
        app.router.routes.append(Route(PATH, endpoint=self, include_in_schema=False))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            token, user = self._authenticate(Request(scope))
        except Problem as exc:
            await problem_response(exc.status, exc.code, exc.detail, PATH)(scope, receive, send)
            return
        scope = dict(scope)
        scope[_USER] = user
        scope[_TOKEN_KEY] = hashlib.sha256(token.encode()).hexdigest()
        # The SDK binds a transport session to the principal that opened it.
        scope["user"] = AuthenticatedUser(AccessToken(token=token, client_id=user.sub, subject=user.sub,
                                                      scopes=list(user.roles)))
        await self._sdk(scope, receive, send)

    def _authenticate(self, request: Request) -> tuple[str, User]:
        token = token_from(request, allow_cookie=False)  # no cookie: a web page must not drive tools for you
        if not token:
            raise Problem(401, "unauthorized", "missing bearer token")
        user = decode_token(token, self.auth_secret)
        if not user.has_any("requester"):
            raise Problem(403, "forbidden", "requires one of the roles: requester")
        return token, user


def http_caller(ctx: ServerRequestContext) -> Caller:
    """The caller the route authenticated; the connection is the MCP session, or the token without one."""
    scope = ctx.request.scope
    session = ctx.request.headers.get("mcp-session-id")
    return Caller(user=scope[_USER], connection_key=f"session:{session}" if session else f"token:{scope[_TOKEN_KEY]}")
