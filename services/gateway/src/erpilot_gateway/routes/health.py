"""Liveness and readiness."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from erpilot_contracts.subjects import ping_subject
from erpilot_platform.broker import ServiceUnavailable, request
from erpilot_platform.runtime import PingV1

router = APIRouter(tags=["health"])
SERVICES = ("agent", "approval", "erp")


@router.get("/healthz")
async def healthz() -> dict:
    """Liveness: the gateway process answers."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request_: Request) -> JSONResponse:
    """Readiness: the broker is connected and every service answers from its database."""
    broker = request_.app.state.broker
    checks: dict[str, str] = {}
    connected = bool(broker.config.connection_state) and broker.config.connection_state.connection.is_connected
    checks["broker"] = "ok" if connected else "unavailable"

    async def ping(service: str) -> None:
        try:
            reply = await request(broker, ping_subject(service), PingV1(), durable=False, timeout=2.0)
            checks[service] = "ok" if reply.ok else f"error: {reply.error.code}"
        except ServiceUnavailable as exc:
            checks[service] = f"unavailable: {exc}"
        except Exception as exc:  # the broker itself may be away
            checks[service] = f"unavailable: {exc.__class__.__name__}"

    if connected:
        await asyncio.gather(*(ping(s) for s in SERVICES))
    ready = all(v == "ok" for v in checks.values()) and len(checks) == len(SERVICES) + 1
    return JSONResponse({"status": "ready" if ready else "not_ready", "checks": checks},
                        status_code=200 if ready else 503)
