"""docker-compose.yml sets and checks the JWT issuer and audience (issue 26): the gateway is given both,
never empty when your shell leaves them unset, and the `token` service mints with the same secret,
issuer and audience, so its tokens pass and a token without them (or from another issuer) is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from erpilot.stack.tokens import make_token
from erpilot_gateway.auth import decode_token
from erpilot_gateway.problems import Problem
from erpilot_gateway.settings import GatewaySettings

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
AUTH = ("ERPILOT_AUTH_SECRET", "ERPILOT_AUTH_ISSUER", "ERPILOT_AUTH_AUDIENCE", "ERPILOT_AUTH_MAX_TTL")
# ${NAME:-default} or ${NAME:?message}: what compose substitutes when NAME is unset.
SUBSTITUTION = re.compile(r"^\$\{(?P<name>\w+)(?::-(?P<default>[^}]*)|:\?(?P<required>[^}]*))\}$")


@pytest.fixture(scope="module")
def compose() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def when_unset(value: str) -> str | None:
    """The value compose gives with the variable unset (None: compose refuses to start)."""
    match = SUBSTITUTION.match(value)
    if match is None:
        return value
    return None if match["required"] is not None else match["default"]


def test_the_gateway_checks_an_issuer_and_an_audience_and_the_token_service_mints_with_them(compose, monkeypatch):
    gateway = compose["services"]["gateway"]["environment"]
    for name in ("ERPILOT_AUTH_ISSUER", "ERPILOT_AUTH_AUDIENCE"):
        assert SUBSTITUTION.match(gateway[name])["name"] == name  # yours when you set it ...
        assert when_unset(gateway[name]), f"{name} is empty when unset: tokens go unchecked"  # ... else a default
    assert when_unset(gateway["ERPILOT_AUTH_SECRET"]) is None  # no default secret: set it or nothing starts
    token = compose["services"]["token"]
    assert {name: token["environment"][name] for name in AUTH} == {name: gateway[name] for name in AUTH}
    assert token["entrypoint"] == ["erpilot", "token"] and token["profiles"] == ["tools"]

    # What those values do, as the gateway's settings and `erpilot token` read them.
    for name in AUTH:
        monkeypatch.delenv(name, raising=False)
    issuer, audience = when_unset(gateway["ERPILOT_AUTH_ISSUER"]), when_unset(gateway["ERPILOT_AUTH_AUDIENCE"])
    secret = "compose-secret-" + "c" * 32
    rules = GatewaySettings(auth_secret=secret, auth_issuer=issuer, auth_audience=audience,
                            auth_max_ttl=when_unset(gateway["ERPILOT_AUTH_MAX_TTL"])).token_rules()
    monkeypatch.setenv("ERPILOT_AUTH_ISSUER", issuer)
    monkeypatch.setenv("ERPILOT_AUTH_AUDIENCE", audience)
    assert decode_token(make_token(secret, "alice", ["requester"]), rules).sub == "alice"
    monkeypatch.delenv("ERPILOT_AUTH_ISSUER")
    monkeypatch.delenv("ERPILOT_AUTH_AUDIENCE")
    for foreign in (make_token(secret, "mallory", ["admin"]),
                    make_token(secret, "mallory", ["admin"], issuer="elsewhere", audience=audience),
                    make_token(secret, "mallory", ["admin"], issuer=issuer, audience="another-api")):
        with pytest.raises(Problem) as refused:
            decode_token(foreign, rules)
        assert refused.value.status == 401


# Every way a nats-server configuration can open its HTTP monitoring port.
MONITORING = re.compile(r"^\s*(?P<key>http|https|http_port|https_port|monitor_port|http_host)\s*[:=]\s*(?P<value>\S+)",
                        re.MULTILINE)


@pytest.mark.parametrize("config", ["nats_conf", "nats_cluster_conf"])
def test_nats_monitoring_listens_on_loopback_only(compose, config):
    """Issue 32: NATS monitoring (/connz, /subsz) lists every client's live inboxes; no other container (the
    agent's above all) may reach it. Only the healthcheck, inside the NATS container, asks it."""
    content = compose["configs"][config]["content"]
    settings = [(m["key"], m["value"]) for m in MONITORING.finditer(content)]
    assert settings == [("http", "127.0.0.1:8222")]
    for name, service in compose["services"].items():
        assert not any("8222" in str(port) for port in service.get("ports", [])), name
        if "nats" in name:
            assert "http://127.0.0.1:8222/healthz?js-enabled-only=true" in service["healthcheck"]["test"], name
