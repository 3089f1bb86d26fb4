"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from erpilot_gateway.answers import Liveness, Readiness
from erpilot_gateway.services import PINGED

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> Liveness:
    """Liveness: the gateway process answers."""
    return Liveness()


@router.get("/readyz", response_model=None, responses={200: {"model": Readiness}, 503: {"model": Readiness}})
async def readyz(request: Request) -> JSONResponse:
    """Readiness: the broker is connected and every service answers from its database."""
    checks = await request.app.state.services.readiness()
    ready = all(v == "ok" for v in checks.values()) and len(checks) == len(PINGED) + 1
    answer = Readiness(status="ready" if ready else "not_ready", checks=checks)
    return JSONResponse(answer.model_dump(mode="json"), status_code=200 if ready else 503)
