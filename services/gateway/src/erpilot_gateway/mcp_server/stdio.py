"""``erpilot mcp --stdio``: the same MCP server for a local client that launches a process.

The process is a gateway of its own (it speaks NATS with the gateway's identity) serving one MCP
connection on stdin/stdout for one token: it verifies the token exactly as the HTTP API does and
every call of the connection goes to one Erpilot session of the token's subject. Logs go to stderr.
"""

from __future__ import annotations

import uuid

from mcp.server.stdio import stdio_server

from erpilot_gateway.auth import TokenRules, User, decode_token
from erpilot_gateway.mcp_server.server import Caller, ErpilotMcp
from erpilot_gateway.problems import Problem
from erpilot_gateway.requesters import RequesterAssertions
from erpilot_gateway.services import Services
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform.broker import create_broker
from erpilot_platform.runtime import connect_with_retry

SERVICE = "gateway"


class TokenRefused(Exception):
    """The token is missing, invalid, expired, or lacks the requester role."""


def stdio_user(token: str | None, rules: TokenRules) -> User:
    """The token's user, as the HTTP API would authenticate it."""
    if not token:
        raise TokenRefused("set ERPILOT_TOKEN (or pass --token) to a bearer token with the requester role")
    try:
        user = decode_token(token, rules)
    except Problem as exc:
        raise TokenRefused(exc.detail) from None
    if not user.has_any("requester"):
        raise TokenRefused("the token lacks the requester role")
    return user


async def serve_stdio(settings: GatewaySettings, user: User) -> None:
    """Serve one MCP connection on stdin/stdout until the client closes it."""
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    await connect_with_retry(broker)
    try:
        caller = Caller(user=user, connection_key=f"stdio:{uuid.uuid4().hex}")
        services = Services(broker, settings.request_timeout_seconds, RequesterAssertions(settings.assertion_key()))
        mcp = ErpilotMcp(services, lambda _ctx: caller)
        async with stdio_server() as (read_stream, write_stream):
            await mcp.server.run(read_stream, write_stream, mcp.server.create_initialization_options())
    finally:
        await broker.stop()
