"""The gateway's only way to the other services: typed NATS requests that return data or raise Problem."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsBroker

from erpilot_contracts import json_input
from erpilot_contracts.requests import Endpoint, Rep, Req
from erpilot_gateway.problems import Problem
from erpilot_platform.broker import ReplyError, call, send


class Services:
    def __init__(self, broker: NatsBroker, timeout: float):
        self.broker = broker
        self.timeout = timeout

    async def call(self, endpoint: Endpoint[Req, Rep], payload: Req) -> Rep:
        """The reply's ``data`` as ``endpoint``'s reply model; a service's refusal as the Problem of its ``ErrorV1``."""
        _check_storable(payload)
        try:
            return await call(self.broker, endpoint, payload, timeout=self.timeout)
        except ReplyError as exc:
            raise Problem.from_error(exc.error) from None

    async def data(self, endpoint: Endpoint[Req, Any], payload: Req) -> dict[str, Any]:
        """The reply's ``data`` exactly as the service sent it, for the routes that pass it on to the client
        unchanged (parsing it into its model and back could add defaults or reorder it)."""
        _check_storable(payload)
        reply = await send(self.broker, endpoint, payload, timeout=self.timeout)
        if not reply.ok:
            raise Problem.from_error(reply.error)
        return reply.data or {}


def _check_storable(payload: Any) -> None:
    try:  # what reaches a service must be storable: no NUL, no integer beyond 64 bits (path, query, body)
        json_input.check(payload.model_dump(mode="json"))
    except json_input.BadInput as exc:
        raise Problem(exc.status, exc.code, str(exc)) from None
