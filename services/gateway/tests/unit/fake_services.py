"""The gateway in-process on a stand-in for its services, shared by the tests of what reaches them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi.testclient import TestClient

from erpilot_contracts.requests import Endpoint
from erpilot_gateway.app import create_app
from erpilot_gateway.requesters import RequesterAssertions
from erpilot_gateway.services import Services
from erpilot_gateway.session_watch import SessionWatch
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform.grants import load_signing_key, new_keypair_env

ASSERTION_KEYS = new_keypair_env("ERPILOT_ASSERTION")


def settings(secret: str, **kw: Any) -> GatewaySettings:
    """The gateway's settings outside dev mode, with the requester assertion key it signs with."""
    return GatewaySettings(auth_secret=secret, assertion_signing_key=ASSERTION_KEYS["ERPILOT_ASSERTION_SIGNING_KEY"],
                           **kw)


class RecordingServices:
    """Stands in for ``erpilot_gateway.services.Services``: records every request as ``(subject, payload)`` and
    answers what ``answer(subject, payload)`` returns (or raises, e.g. a Problem); a typed ``call`` parses that
    answer as the endpoint's reply model, as the real one does. Queries are recorded too (``queries``).

    The session watch hands out the events ``events(session_id)`` lists once the command was sent (the real
    one sees only what is published after it subscribed); ``log`` records the order of watch and send.
    """

    def __init__(self, answer: Callable[[str, Any], dict], *, timeout: float = 1.0,
                 events: Callable[[str], list[dict]] | None = None) -> None:
        self.answer = answer
        self.timeout = timeout
        self.broker = None  # not connected: the port's size check takes NATS' default max_payload
        self.events = events or (lambda session_id: [])
        self.assertions = RequesterAssertions(load_signing_key(ASSERTION_KEYS["ERPILOT_ASSERTION_SIGNING_KEY"]))
        self._owners: dict[str, str] = {}
        self.sent: list[tuple[str, Any]] = []
        self.queries: list[tuple[str, Any]] = []
        self.log: list[str] = []

    async def data(self, endpoint: Endpoint, payload: Any) -> dict:
        (self.sent if endpoint.durable or endpoint.retried else self.queries).append((endpoint.subject, payload))
        self.log.append(f"send {endpoint.subject}")
        return self.answer(endpoint.subject, payload)

    async def call(self, endpoint: Endpoint, payload: Any) -> Any:
        return endpoint.reply.model_validate(await self.data(endpoint, payload))

    # The real port's signing, owner check first (its look at the session is one more recorded query).
    vouch_call = Services.vouch_call
    vouch_run = Services.vouch_run
    run_id = Services.run_id
    issued_run = Services.issued_run
    check_owner = Services.check_owner
    new_session_id = Services.new_session_id

    @asynccontextmanager
    async def watch_session(self, session_id: str) -> AsyncIterator[SessionWatch]:
        self.log.append(f"watch {session_id}")
        watch = ScriptedWatch(lambda: self.events(session_id))
        try:
            yield watch
        finally:
            self.log.append(f"unwatch {session_id}")


class ScriptedWatch(SessionWatch):
    """A ``SessionWatch`` fed from a script when its first event is asked for (after the command was sent)."""

    def __init__(self, script: Callable[[], list[dict]]) -> None:
        super().__init__()
        self.script = script

    async def first(self, wanted, *, timeout: float):
        for event in self.script():
            await self.queue.put(event)
        return await super().first(wanted, timeout=timeout)


def gateway_client(services: RecordingServices, secret: str) -> TestClient:
    app = create_app(settings(secret), broker=object())
    app.state.services = services
    return TestClient(app)  # no lifespan: nothing connects to NATS


def sending(services: RecordingServices, send: Callable[[], Any]) -> tuple[Any, list[tuple[str, Any]]]:
    """``send()``'s response and the commands it sent."""
    before = len(services.sent)
    response = send()
    return response, services.sent[before:]
