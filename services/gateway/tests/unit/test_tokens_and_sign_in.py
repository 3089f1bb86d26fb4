"""Tokens and the console's sign-in (issue 10, item 4): the secret is long enough outside dev mode,
issuer, audience and lifetime are enforced, and a `?token=` link is protected like the sign-in form."""

from __future__ import annotations

import json
import logging
import time

import jwt
import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider

from erpilot_gateway.app import _mark_gateway_span, create_app
from erpilot_gateway.auth import TokenRules, decode_token
from erpilot_gateway.problems import Problem
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform.logs import JsonFormatter
from erpilot_platform.settings import ConfigurationError

from .fake_services import settings

pytestmark = pytest.mark.unit

SECRET = "gateway-token-test-" + "z" * 32
HOUR = 3600


def make(claims: dict, secret: str = SECRET) -> str:
    return jwt.encode({"sub": "bob", "roles": ["approver"], **claims}, secret, algorithm="HS256")


def refused(token: str, rules: TokenRules) -> str:
    with pytest.raises(Problem) as problem:
        decode_token(token, rules)
    assert (problem.value.status, problem.value.code) == (401, "unauthorized")
    return problem.value.detail


def test_a_short_secret_is_refused_outside_dev_mode_with_how_to_make_one() -> None:
    with pytest.raises(ConfigurationError, match="openssl rand -base64 48"):
        GatewaySettings(auth_secret="x" * 31).secret()
    assert GatewaySettings(auth_secret="x" * 31, dev_mode=True).secret() == "x" * 31
    assert GatewaySettings(auth_secret="é" * 16).secret() == "é" * 16  # 32 bytes in UTF-8


def test_issuer_and_audience_are_enforced_only_when_set() -> None:
    now = int(time.time())
    plain = make({"iat": now, "exp": now + HOUR})
    assert decode_token(plain, TokenRules(SECRET)).sub == "bob"
    rules = TokenRules(SECRET, issuer="https://id.example", audience="erpilot")
    assert "iss" in refused(plain, rules)
    assert decode_token(make({"iat": now, "exp": now + HOUR, "iss": "https://id.example", "aud": "erpilot"}),
                        rules).sub == "bob"
    refused(make({"iat": now, "exp": now + HOUR, "iss": "https://evil.example", "aud": "erpilot"}), rules)
    refused(make({"iat": now, "exp": now + HOUR, "iss": "https://id.example", "aud": "other"}), rules)
    refused(make({"iat": now, "exp": now + HOUR, "iss": "https://id.example"}), rules)


def test_a_token_living_longer_than_the_max_ttl_is_refused() -> None:
    now = int(time.time())
    rules = GatewaySettings(auth_secret=SECRET).token_rules()
    assert rules.max_ttl_seconds == 24 * HOUR  # the default
    assert decode_token(make({"iat": now, "exp": now + 24 * HOUR}), rules).sub == "bob"
    assert "ERPILOT_AUTH_MAX_TTL" in refused(make({"iat": now, "exp": now + 24 * HOUR + 1}), rules)
    # Issued long ago and still valid for a year: the lifetime counts from iat, not from now.
    refused(make({"iat": now - HOUR, "exp": now + 365 * 24 * HOUR}), rules)
    # Without iat the lifetime is what is left of it.
    refused(make({"exp": now + 25 * HOUR}), rules)
    assert decode_token(make({"exp": now + 23 * HOUR}), rules).sub == "bob"
    short = GatewaySettings(auth_secret=SECRET, auth_max_ttl="1h").token_rules()
    refused(make({"iat": now, "exp": now + 2 * HOUR}), short)
    with pytest.raises(ConfigurationError, match="ERPILOT_AUTH_MAX_TTL"):
        GatewaySettings(auth_secret=SECRET, auth_max_ttl="forever").token_rules()


APP = create_app(settings(SECRET), broker=object())
CLIENT = TestClient(APP)  # no lifespan: nothing connects to NATS


def test_tokens_and_roles_are_checked_on_the_event_loop_not_in_the_thread_pool(monkeypatch) -> None:
    # A sync dependency costs a thread hop per request (issue 13's profile); these answers need none.
    import fastapi.dependencies.utils as dependency_utils

    async def no_thread_pool(*_args, **_kwargs):
        raise AssertionError("a dependency ran in the thread pool")

    monkeypatch.setattr(dependency_utils, "run_in_threadpool", no_thread_pool)
    assert CLIENT.get("/v1/erp/products").status_code == 401
    no_roles = make({"exp": int(time.time()) + HOUR, "roles": []})
    response = CLIENT.get("/v1/erp/products", headers={"Authorization": f"Bearer {no_roles}"})
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")


def link_token() -> str:
    now = int(time.time())
    return make({"iat": now, "exp": now + HOUR})


@pytest.mark.parametrize("headers", [{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                                     {"Origin": "https://evil.example"}])
def test_a_sign_in_link_opened_from_another_site_signs_nobody_in(headers) -> None:
    response = CLIENT.get("/", params={"token": link_token()}, headers=headers)
    assert response.status_code == 403
    assert "set-cookie" not in response.headers and "another site" in response.text
    form = CLIENT.post("/console/sign-in", data={"token": link_token()}, headers=headers)
    assert form.status_code == 403 and "set-cookie" not in form.headers


def test_a_sign_in_link_sets_the_cookie_and_replaces_the_url_in_history() -> None:
    token = link_token()
    response = CLIENT.get("/", params={"token": token}, headers={"Sec-Fetch-Site": "none"})
    assert response.status_code == 200
    assert response.cookies.get("erpilot_token") == token
    assert response.headers["referrer-policy"] == "no-referrer"
    assert '<script src="/console/static/signed-in.js">' in response.text and token not in response.text
    script = CLIENT.get("/console/static/signed-in.js")
    assert script.status_code == 200 and 'history.replaceState(null, "", "/")' in script.text
    assert "location.replace(" in script.text


def test_a_token_in_a_url_never_reaches_a_log_line() -> None:
    token = link_token()
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5000", "GET", f"/?token={token}&x=1", "1.1", 200), None)
    line = json.loads(JsonFormatter("gateway").format(record))
    assert token not in line["msg"] and "/?token=[redacted]&x=1" in line["msg"]


def test_a_token_in_a_url_never_reaches_a_trace_attribute() -> None:
    token = link_token()
    span = TracerProvider().get_tracer("test").start_span("GET /", attributes={
        "http.target": f"/?token={token}", "http.url": f"http://127.0.0.1:8000/?token={token}",
        "url.query": f"token={token}", "http.method": "GET"})
    _mark_gateway_span(span, {"type": "http"})
    assert not [value for value in span.attributes.values() if token in str(value)]
    assert span.attributes["http.target"] == "/?token=[redacted]"
    assert span.attributes["erpilot.service"] == "gateway"
