"""The tool catalog with the policy in force."""

from __future__ import annotations

from fastapi import APIRouter, Request

from erpilot_gateway.answers import ToolCatalogue
from erpilot_gateway.auth import require_roles
from erpilot_gateway.catalogue import tool_catalogue

router = APIRouter(prefix="/v1/tools", tags=["tools"])


@router.get("", dependencies=[require_roles("requester")])
async def list_tools(request: Request) -> ToolCatalogue:
    """Every tool the policy does not deny, with its kind, input schema and the policy that applies to it."""
    return ToolCatalogue.model_validate(await tool_catalogue(request.app.state.services))
