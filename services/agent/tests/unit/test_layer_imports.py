"""The agent's layers stay honest: the service layer works on its ports only (no adapter, no SQLAlchemy, no
faststream or NATS client), and the domain is plain Python (no I/O library, no platform, no other layer, no
contract message: only the tool catalog and the strict JSON reader of ``erpilot_contracts``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import erpilot_agent.domain
import erpilot_agent.service_layer
from erpilot_platform.testing.imports import imports_of

pytestmark = pytest.mark.unit

IO = ("sqlalchemy", "asyncpg", "faststream", "nats", "httpx", "openai", "socket", "asyncio", "os", "pathlib",
      "subprocess")
DOMAIN_MAY_USE = ("erpilot_contracts.tools.v1", "erpilot_contracts.json_input")


def _offending(package, bad) -> dict[str, list[str]]:
    return {name: found for name, modules in imports_of(package).items() if (found := [m for m in modules if bad(m)])}


def _is(module: str, *prefixes: str) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def test_the_service_layer_imports_no_adapter_no_sqlalchemy_and_no_messaging_library():
    assert _offending(erpilot_agent.service_layer, lambda m: _is(
        m, "erpilot_agent.adapters", "erpilot_agent.entrypoints", "erpilot_agent.app", "sqlalchemy", "asyncpg",
        "faststream", "nats")) == {}


def test_the_domain_imports_no_io_no_platform_no_other_layer_and_no_contract_message():
    assert _offending(erpilot_agent.domain, lambda m: _is(m, *IO, "erpilot_platform", "erpilot_agent.adapters",
                                                          "erpilot_agent.service_layer", "erpilot_agent.entrypoints")
                      or (_is(m, "erpilot_contracts") and not _is(m, *DOMAIN_MAY_USE))) == {}


def test_the_rules_find_a_forbidden_import(tmp_path):
    """The checks above can fail: a layer that imports an adapter and SQLAlchemy is found."""
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "leaky.py").write_text("import sqlalchemy\nfrom erpilot_agent.adapters import sql_work\n")
    package = SimpleNamespace(__file__=str(tmp_path / "__init__.py"), __name__="leaky_layer")

    assert _offending(package, lambda m: _is(m, "erpilot_agent.adapters", "sqlalchemy")) == {
        "leaky.py": ["sqlalchemy", "erpilot_agent.adapters"]}
