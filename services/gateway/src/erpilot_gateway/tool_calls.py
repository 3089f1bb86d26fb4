"""The tool-call pipeline as the gateway drives it, shared by the HTTP API and the MCP endpoint.

Everything that matters (validation, policy, approval, fingerprint binding, the ledger's checks) happens
in the agent behind ``cmd.agent.tool_call``; this module is the one place the gateway asks for it and
the one place that shapes the answer (SPEC §5 ``POST /v1/sessions/{sid}/tool-calls``).
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts import requests
from erpilot_contracts.agent.v1 import GetToolCallV1, StartToolCallV1
from erpilot_gateway.services import Services

_AWAITING_KEYS = ("call_id", "status", "pending_id", "fingerprint", "expires_at", "approval_url", "preview")


async def start_tool_call(services: Services, *, session_id: str, owner: str, tool: str, arguments: Any,
                          call_id: str) -> dict[str, Any]:
    """Run one call as far as it goes without a person; returns the agent's view (raises Problem)."""
    cmd = StartToolCallV1(session_id=session_id, owner=owner, tool=tool, arguments=arguments, call_id=call_id)
    return await services.data(requests.AGENT_TOOL_CALL, cmd)


async def get_tool_call(services: Services, *, session_id: str, owner: str, call_id: str) -> dict[str, Any]:
    """Status, outcome, result or error code of one call of the owner's session (raises Problem)."""
    return await services.data(requests.AGENT_TOOL_CALL_VIEW,
                                GetToolCallV1(session_id=session_id, owner=owner, call_id=call_id))


def tool_call_answer(view: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """SPEC §5: finished → 200 with outcome and result; awaiting approval → 202 with the approval."""
    if view["status"] == "finished":
        body = {"call_id": view["call_id"], "status": "finished", "outcome": view["outcome"],
                "result": view.get("result")}
        if view.get("error"):
            body["error"] = {"code": view["error"]["code"], "message": view["error"]["message"]}
        return 200, body
    if view["status"] == "awaiting_approval":
        return 202, {k: view.get(k) for k in _AWAITING_KEYS}
    return 202, {"call_id": view["call_id"], "status": view["status"]}
