"""The gateway in-process on a stand-in for its services, shared by the tests of what reaches them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from erpilot_contracts.requests import Endpoint
from erpilot_gateway.app import create_app
from erpilot_gateway.settings import GatewaySettings


class RecordingServices:
    """Stands in for ``erpilot_gateway.services.Services``: records every command as ``(subject, payload)``
    and answers what ``answer(subject, payload)`` returns (or raises, e.g. a Problem); a query is a test
    error, since these tests are about what the gateway sends."""

    def __init__(self, answer: Callable[[str, Any], dict]) -> None:
        self.answer = answer
        self.sent: list[tuple[str, Any]] = []

    async def data(self, endpoint: Endpoint, payload: Any) -> dict:
        assert endpoint.durable, "no query expected"
        self.sent.append((endpoint.subject, payload))
        return self.answer(endpoint.subject, payload)


def gateway_client(services: RecordingServices, secret: str) -> TestClient:
    app = create_app(GatewaySettings(auth_secret=secret), broker=object())
    app.state.services = services
    return TestClient(app)  # no lifespan: nothing connects to NATS


def sending(services: RecordingServices, send: Callable[[], Any]) -> tuple[Any, list[tuple[str, Any]]]:
    """``send()``'s response and the commands it sent."""
    before = len(services.sent)
    response = send()
    return response, services.sent[before:]
