"""The gateway's only way to the other services: typed NATS requests that return data or raise Problem."""

from __future__ import annotations

from typing import Any, TypeVar

from faststream.nats import NatsBroker
from pydantic import BaseModel, RootModel

from erpilot_contracts import json_input
from erpilot_contracts.base import Message
from erpilot_gateway.problems import Problem
from erpilot_platform.broker import ReplyError, call

T = TypeVar("T", bound=BaseModel)


class AnyData(RootModel[dict[str, Any]]):
    """A reply's ``data`` as the service sent it, for the routes that pass it on to the client unchanged."""


class Services:
    def __init__(self, broker: NatsBroker, timeout: float):
        self.broker = broker
        self.timeout = timeout

    async def command(self, subject: str, payload: Message) -> dict[str, Any]:
        """A durable command (JetStream): retried by the service until handled, answered once."""
        return (await self.call(subject, payload, AnyData, durable=True)).root

    async def query(self, subject: str, payload: Message) -> dict[str, Any]:
        return (await self.call(subject, payload, AnyData, durable=False)).root

    async def call(self, subject: str, payload: Message, reply_model: type[T], *, durable: bool) -> T:
        """The reply's ``data`` as ``reply_model``; a service's refusal as the Problem of its ``ErrorV1``."""
        try:  # what reaches a service must be storable: no NUL, no integer beyond 64 bits (path, query, body)
            json_input.check(payload.model_dump(mode="json"))
        except json_input.BadInput as exc:
            raise Problem(exc.status, exc.code, str(exc)) from None
        try:
            return await call(self.broker, subject, payload, reply_model, durable=durable, timeout=self.timeout)
        except ReplyError as exc:
            raise Problem.from_error(exc.error) from None
