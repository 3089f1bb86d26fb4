"""What ``tools/list`` shows: the tool catalogue under the policy in force, as MCP tools (no I/O).

The input schemas are exactly those of ``GET /v1/tools``; a tool the policy denies is not listed; a
tool that needs approval says so in its description, its annotations and its ``_meta``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from erpilot_contracts.tools.v1 import get_tool

STATUS_TOOL = "get_tool_call_status"
POLICY_META = "erpilot.dev/policy"

_STATUS_SCHEMA = {
    "type": "object",
    "properties": {"call_id": {"type": "string", "minLength": 1, "maxLength": 100,
                               "description": "The call_id a tools/call answered with."}},
    "required": ["call_id"],
    "additionalProperties": False,
}


def mcp_tools(items: list[dict[str, Any]]) -> list[types.Tool]:
    """Every tool of ``GET /v1/tools``'s ``items`` that the policy does not deny, plus the status tool."""
    tools = [_tool(item) for item in items if item["policy"]["action"] != "deny"]
    tools.append(types.Tool(
        name=STATUS_TOOL,
        description="Status of an earlier tool call of this session: awaiting_approval, executing or finished "
                    "with its outcome and result (the way to learn what became of a write that waited).",
        input_schema=_STATUS_SCHEMA,
        annotations=types.ToolAnnotations(title="Tool call status", read_only_hint=True, destructive_hint=False,
                                          idempotent_hint=True, open_world_hint=False),
    ))
    return tools


def _tool(item: dict[str, Any]) -> types.Tool:
    policy = item["policy"]
    kind = item["kind"]
    gated = policy["action"] == "require_approval"
    description = item["description"]
    if gated:
        description += (f" Needs approval by one of: {', '.join(policy['roles'])} (expires after {policy['ttl']})."
                        " The call returns at once with the pending approval (pending_id, approval_url, preview,"
                        f" expires_at); call {STATUS_TOOL} with its call_id to learn the outcome.")
    traits = get_tool(item["name"]).traits
    annotations = types.ToolAnnotations(
        title=item["name"].replace("_", " ").capitalize(),
        read_only_hint=kind == "read",
        destructive_hint=kind == "write",  # drafts only add revisions; writes move stock or money
        idempotent_hint=traits.repeat_safe,  # a repeat with the same arguments has no further effect
        open_world_hint=False,
    )
    meta = {POLICY_META: {"kind": kind, "action": policy["action"], "requires_approval": gated,
                          "roles": policy["roles"], "ttl": policy["ttl"], "money_out": traits.money_out,
                          "risk": traits.default_risk.value, "schema_version": item["schema_version"]}}
    return types.Tool(name=item["name"], description=description, input_schema=item["input_schema"],
                      annotations=annotations, _meta=meta)
