"""docker-compose.yml gives each service exactly its own keys (issue 25, 26): the approval service the grant signing
key, the assertion verify key and the ledger verify key, the ERP the grant and assertion verify keys and the ledger
signing key, the gateway the assertion signing key, the agent none; each is required (compose refuses to start
without it, there is no default), and they are the six variables `erpilot keygen` prints, so its output is all a
deployment needs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from erpilot import cli

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
KEYS = {"ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_ASSERTION_SIGNING_KEY",
        "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_SIGNING_KEY", "ERPILOT_LEDGER_VERIFY_KEY"}
OWN_KEYS = {"approval": {"ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_VERIFY_KEY"},
            "erp": {"ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_SIGNING_KEY"},
            "gateway": {"ERPILOT_ASSERTION_SIGNING_KEY"},
            "agent": set()}
REQUIRED = re.compile(r"^\$\{(?P<name>\w+):\?[^}]*\}$")


@pytest.fixture(scope="module")
def compose() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_each_service_is_given_exactly_its_own_keys_each_required(compose) -> None:
    services = compose["services"]
    given = {name: {key: value for key, value in (service.get("environment") or {}).items() if key in KEYS}
             for name, service in services.items()}

    assert {name: set(keys) for name, keys in given.items() if name in OWN_KEYS} == OWN_KEYS
    assert not any(keys for name, keys in given.items() if name not in OWN_KEYS)  # nats, migrate, token ...
    for name, keys in given.items():
        for key, value in keys.items():
            assert REQUIRED.match(str(value))["name"] == key, (name, key, value)  # yours, and no default


def test_keygen_prints_every_variable_compose_asks_for(compose, capsys) -> None:
    cli.main(["keygen"])
    printed = {line.removeprefix("export ").split("=", 1)[0] for line in capsys.readouterr().out.splitlines()
               if line.startswith("export ")}
    asked = {key for service in compose["services"].values() for key in (service.get("environment") or {})
             if key in KEYS}
    assert printed == asked == KEYS
