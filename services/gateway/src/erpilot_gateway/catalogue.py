"""The tool catalogue as the gateway offers it, with the policy in force: what ``GET /v1/tools`` answers and the
MCP endpoint lists (one place, so the two never differ)."""

from __future__ import annotations

from erpilot_contracts import requests
from erpilot_contracts.approval.v1 import PolicyQueryV1, ToolPolicyV1
from erpilot_contracts.tools.v1 import TOOLS
from erpilot_gateway.services import Services


def format_ttl(seconds: int) -> str:
    """Seconds as the policy file writes durations: "15m", "24h", "90s"."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


async def tool_catalogue(services: Services) -> dict:
    """The catalogue without the tools the policy denies, with the policy in force (also what MCP lists)."""
    policy = await services.call(requests.APPROVAL_POLICY, PolicyQueryV1())
    by_tool = {p.tool: p for p in policy.tools}
    items = []
    for spec in TOOLS.values():
        rule = by_tool.get(spec.name) or ToolPolicyV1(tool=spec.name, action="deny", roles=[], ttl_seconds=0)
        if rule.action == "deny":
            continue  # SPEC §9: a denied tool is not offered (the model's list leaves it out too)
        items.append({
            "name": spec.name, "kind": spec.kind.value, "schema_version": spec.schema_version,
            "description": spec.description, "input_schema": spec.input_schema(),
            "policy": {"action": rule.action, "roles": rule.roles, "ttl": format_ttl(rule.ttl_seconds)},
        })
    return {"items": items, "policy_version": policy.version}
