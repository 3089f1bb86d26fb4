"""The gateway's edge (``input_guard``): size, hostile JSON and NUL are refused before any route runs.

The gateway runs in-process with its real ``Services``; only the NATS request underneath is replaced by
a fake that records every message that would be sent.
"""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from fastapi.testclient import TestClient

from erpilot_contracts.base import ReplyV1
from erpilot_gateway.app import create_app
from erpilot_platform import broker as broker_module
from erpilot_platform.broker import PayloadTooLarge

from .fake_services import settings

pytestmark = pytest.mark.unit

SECRET = "gateway-guard-secret-" + "x" * 32
MIB = 1024 * 1024


class FakeBroker:
    """Stands in for NATS behind the gateway's real ``Services``: records what would be sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.too_large = False

    async def request(self, broker: Any, subject: str, payload: Any, *, durable: bool, timeout: float) -> ReplyV1:
        if self.too_large:
            raise PayloadTooLarge(subject, 2 * MIB, MIB)
        self.sent.append((subject, payload))
        return ReplyV1.success({"session_id": getattr(payload, "session_id", "ses_1"), "items": []})


@pytest.fixture
def gateway(monkeypatch):
    fake = FakeBroker()
    monkeypatch.setattr(broker_module, "request", fake.request)  # under broker.call, which Services uses
    app = create_app(settings(SECRET), broker=object())
    return TestClient(app), fake


def auth() -> dict[str, str]:
    claims = {"sub": "ann", "roles": ["requester", "admin"], "exp": int(time.time()) + 3600}
    return {"Authorization": "Bearer " + jwt.encode(claims, SECRET, algorithm="HS256"),
            "Content-Type": "application/json"}


def problem(response) -> tuple[int, str]:
    assert response.headers["content-type"] == "application/problem+json", response.text
    return response.status_code, response.json()["code"]


def test_a_body_over_1_mib_is_413_before_authentication(gateway):
    client, services = gateway
    raw = json.dumps({"title": "x" * MIB}).encode()
    assert problem(client.post("/v1/sessions", content=raw)) == (413, "payload_too_large")  # no token
    assert problem(client.post("/v1/sessions", content=raw, headers=auth())) == (413, "payload_too_large")

    def chunked():  # no Content-Length: counted while reading, refused at the limit
        for _ in range(20):
            yield b"x" * 65536

    assert problem(client.post("/v1/sessions", content=chunked(), headers=auth())) == (413, "payload_too_large")
    assert services.sent == []


def test_a_body_of_exactly_1_mib_is_read(gateway):
    client, services = gateway
    raw = b'{"title": "t"}' + b" " * (MIB - 14)
    assert len(raw) == MIB
    assert client.post("/v1/sessions", content=raw, headers=auth()).status_code == 201
    assert services.sent[0][1].title == "t"


def test_a_message_over_the_broker_limit_is_413(gateway):
    client, services = gateway
    services.too_large = True
    response = client.post("/v1/sessions", json={"title": "x"}, headers=auth())
    assert problem(response) == (413, "payload_too_large")


@pytest.mark.parametrize(("raw", "expected"), [
    (b'{"title": "a", "title": "b"}', (400, "invalid_json")),
    (b'{"title": "\\ud800"}', (400, "invalid_json")),
    (b'{"title": ' + b"[" * 5000 + b"]" * 5000 + b"}", (400, "invalid_json")),
    (b'{"title": "\\u0000"}', (422, "invalid_arguments")),
    (b'{"title": 18446744073709551616}', (422, "invalid_arguments")),
])
def test_hostile_json_is_refused_and_nothing_is_sent(gateway, raw, expected):
    client, services = gateway
    assert problem(client.post("/v1/sessions", content=raw, headers=auth())) == expected
    assert services.sent == []


def test_fingerprinted_arguments_stay_within_2_53(gateway):
    client, services = gateway
    body = {"tool": "refund_payment", "arguments": {"order_id": "O-1", "amount_minor": 2**53, "currency": "EUR",
                                                    "channel": "original"}}
    response = client.post("/v1/sessions/ses_1/tool-calls", json=body, headers=auth())
    assert problem(response) == (422, "invalid_arguments")
    assert services.sent == []


@pytest.mark.parametrize("url", ["/v1/erp/products?q=%00", "/v1/erp/products/A%00B", "/v1/erp/customers?q%00=1"])
def test_nul_in_the_url_is_refused(gateway, url):
    client, services = gateway
    assert problem(client.get(url, headers=auth())) == (422, "invalid_arguments")
    assert services.sent == []


def test_a_value_beyond_64_bits_in_a_query_never_reaches_a_service(gateway):
    client, services = gateway
    response = client.get("/v1/erp/drafts/D-1?revision=99999999999999999999", headers=auth())
    assert problem(response) == (422, "invalid_arguments")
    assert services.sent == []


def test_other_content_types_are_not_read_as_json(gateway):
    client, services = gateway
    response = client.post("/v1/sessions", content=b'{"title": "a", "title": "b"}',
                           headers={**auth(), "Content-Type": "text/plain"})
    assert problem(response) == (422, "invalid_body")  # FastAPI refuses it; the guard does not parse it
    assert services.sent == []
