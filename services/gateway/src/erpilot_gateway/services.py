"""The gateway's only way to the other services: typed NATS requests that return data or raise Problem, the
requester assertion each command to the agent carries, and a watch on a session's events."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from faststream.nats import NatsBroker

from erpilot_contracts import json_input
from erpilot_contracts.requests import Endpoint, Rep, Req
from erpilot_gateway.auth import User
from erpilot_gateway.problems import Problem
from erpilot_gateway.requesters import RequesterAssertions
from erpilot_gateway.session_watch import SessionWatch, watch_session
from erpilot_platform.broker import ReplyError, call, send


class Services:
    def __init__(self, broker: NatsBroker, timeout: float, assertions: RequesterAssertions):
        self.broker = broker
        self.timeout = timeout
        self.assertions = assertions

    async def call(self, endpoint: Endpoint[Req, Rep], payload: Req) -> Rep:
        """The reply's ``data`` as ``endpoint``'s reply model; a service's refusal as the Problem of its ``ErrorV1``."""
        _check_storable(payload)
        try:
            return await call(self.broker, endpoint, payload, timeout=self.timeout)
        except ReplyError as exc:
            raise Problem.from_error(exc.error) from None

    async def data(self, endpoint: Endpoint[Req, Any], payload: Req) -> dict[str, Any]:
        """The reply's ``data`` exactly as the service sent it, unparsed: only for an answer that must reach the
        client byte for byte whatever this gateway's contracts know (the signed audit rows, ``routes/audit.py``).
        Everything else is read typed (``call``)."""
        _check_storable(payload)
        reply = await send(self.broker, endpoint, payload, timeout=self.timeout)
        if not reply.ok:
            raise Problem.from_error(reply.error)
        return reply.data or {}

    def vouch(self, user: User, session_id: str) -> str:
        """The requester assertion for ``user`` acting in ``session_id`` (every command sent to the agent)."""
        return self.assertions.vouch(user, session_id)

    def watch_session(self, session_id: str) -> AbstractAsyncContextManager[SessionWatch]:
        """A watch on the session's events, from now until the ``async with`` ends."""
        return watch_session(self.broker, session_id)


def _check_storable(payload: Any) -> None:
    try:  # what reaches a service must be storable: no NUL, no integer beyond 64 bits (path, query, body)
        json_input.check(payload.model_dump(mode="json"))
    except json_input.BadInput as exc:
        raise Problem(exc.status, exc.code, str(exc)) from None
