"""The tool-call pipeline as the gateway drives it, shared by the HTTP API and the MCP endpoint.

Everything that matters (validation, policy, approval, fingerprint binding, the ledger's checks) happens
in the agent, the ERP and the approval service behind ``req.agent.tool_call``; this module is the one place the
gateway asks for it and the one place that shapes the answer (SPEC §5 ``POST /v1/sessions/{sid}/tool-calls``).

A write is prepared by the ERP, whose outbox then asks the approval service; the agent's answer to the command
may come before the approval is recorded (status ``running``). The 202 must name the approval, so the gateway
watches the session's events from before it sends the command and answers from the call's ``approval_pending``
(or ``tool_finished``: refused, rejected) when it comes; if nothing comes within the request timeout it asks the
agent for the call's state once and answers that (``{call_id, status}`` for a call still running).
"""

from __future__ import annotations

import time
from typing import Any

from erpilot_contracts import requests
from erpilot_contracts.agent.v1 import GetToolCallV1, StartToolCallV1, ToolCallViewV1
from erpilot_contracts.subjects import is_subject_token
from erpilot_gateway.auth import User
from erpilot_gateway.problems import Problem
from erpilot_gateway.services import Services

_AWAITING_KEYS = ("call_id", "status", "pending_id", "fingerprint", "expires_at", "approval_url", "preview")
# What the agent answers before the write's approval is recorded: the 202 waits for what comes next.
_NOT_YET_DECIDED = ("received", "running")
_ANSWERING_EVENTS = ("approval_pending", "tool_finished")


async def start_tool_call(services: Services, *, session_id: str, user: User, tool: str, arguments: Any,
                          call_id: str, reason: str | None = None) -> ToolCallViewV1:
    """Run one call as far as it goes without a person; returns its view (raises Problem)."""
    if not is_subject_token(session_id):  # no session has such an id; nor may it name other sessions' subjects
        raise Problem(404, "not_found", f"session {session_id} not found")
    started = time.monotonic()
    cmd = StartToolCallV1(session_id=session_id, owner=user.sub, tool=tool, arguments=arguments, call_id=call_id,
                          # after the owner check; bound to the call's arguments
                          assertion=await services.vouch_call(user, session_id, call_id, tool, arguments),
                          reason=reason)
    async with services.watch_session(session_id) as events:  # before the command: no event can be missed
        view = await services.call(requests.AGENT_TOOL_CALL, cmd)
        if view.status not in _NOT_YET_DECIDED:
            return view
        event = await events.first(
            lambda e: e.get("type") in _ANSWERING_EVENTS and e["data"].get("call_id") == call_id,
            timeout=services.timeout - (time.monotonic() - started))
    if event is None:
        return await get_tool_call(services, session_id=session_id, owner=user.sub, call_id=call_id)
    return view_after(view, event)


def view_after(view: ToolCallViewV1, event: dict[str, Any]) -> ToolCallViewV1:
    """The call's view once ``event`` (its ``approval_pending`` or ``tool_finished``) happened."""
    data = event["data"]
    if event["type"] == "approval_pending":
        changes = {key: data.get(key) for key in ("pending_id", "fingerprint", "expires_at", "approval_url", "preview")}
        changes |= {"status": "awaiting_approval", "approval_status": "pending"}
    else:
        changes = {"status": "finished", "outcome": data.get("outcome"), "result": data.get("result"),
                   "error": data.get("error")}
    # Validated again: the event's values (an ISO time, an error object) become the view's types.
    return ToolCallViewV1.model_validate({**view.model_dump(), **changes})


async def get_tool_call(services: Services, *, session_id: str, owner: str, call_id: str) -> ToolCallViewV1:
    """Status, outcome, result or error code of one call of the owner's session (raises Problem)."""
    return await services.call(requests.AGENT_TOOL_CALL_VIEW,
                               GetToolCallV1(session_id=session_id, owner=owner, call_id=call_id))


def tool_call_answer(view: ToolCallViewV1) -> tuple[int, dict[str, Any]]:
    """SPEC §5: finished → 200 with outcome and result; awaiting approval → 202 with the approval."""
    if view.status == "finished":
        body: dict[str, Any] = {"call_id": view.call_id, "status": "finished", "outcome": view.outcome,
                                "result": view.result}
        if view.error:
            body["error"] = {"code": view.error.code, "message": view.error.message}
        return 200, body
    if view.status == "awaiting_approval":
        return 202, view.model_dump(mode="json", include=set(_AWAITING_KEYS))
    return 202, {"call_id": view.call_id, "status": view.status}
