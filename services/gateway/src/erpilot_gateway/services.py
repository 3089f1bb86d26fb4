"""The gateway's only way to the other services: NATS requests that return data or raise Problem."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsBroker

from erpilot_contracts import json_input
from erpilot_contracts.base import Message
from erpilot_gateway.problems import Problem
from erpilot_platform.broker import request


class Services:
    def __init__(self, broker: NatsBroker, timeout: float):
        self.broker = broker
        self.timeout = timeout

    async def command(self, subject: str, payload: Message) -> dict[str, Any]:
        """A durable command (JetStream): retried by the service until handled, answered once."""
        return await self._ask(subject, payload, durable=True)

    async def query(self, subject: str, payload: Message) -> dict[str, Any]:
        return await self._ask(subject, payload, durable=False)

    async def _ask(self, subject: str, payload: Message, *, durable: bool) -> dict[str, Any]:
        try:  # what reaches a service must be storable: no NUL, no integer beyond 64 bits (path, query, body)
            json_input.check(payload.model_dump(mode="json"))
        except json_input.BadInput as exc:
            raise Problem(exc.status, exc.code, str(exc)) from None
        reply = await request(self.broker, subject, payload, durable=durable, timeout=self.timeout)
        if not reply.ok:
            raise Problem.from_error(reply.error)
        return reply.data or {}
