"""The walls between the workspace's packages, read from their source (``erpilot_platform.testing.imports``):

- services never import each other; the libraries import no service; only the CLI (``erpilot``) knows them all;
- no production source holds a test double or reaches for test support: fakes live in each package's
  ``tests/``, and what the tests of several packages share is the platform's test kit, ``erpilot_platform.testing``,
  which nothing in production imports.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from erpilot_platform.testing.imports import imports_of, offending

pytestmark = pytest.mark.unit

SERVICES = ("erpilot_agent", "erpilot_approval", "erpilot_erp", "erpilot_gateway")
LIBRARIES = ("erpilot_contracts", "erpilot_platform")
TEST_KIT = "erpilot_platform.testing"
TEST_SUPPORT = (TEST_KIT, "pytest", "hypothesis", "testcontainers", "playwright", "schemathesis", "tests", "services",
                "conftest")
# How a test double is named here (``MemoryUnitOfWork``, ``RecordingServices``, ``FakeErp``, ``ScriptedWatch``).
DOUBLE = re.compile(r"^(Fake|Stub|Dummy|Mock|Memory|InMemory|Recording|Scripted)[A-Z_]")


def _package(name: str):
    return importlib.import_module(name)


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_imports_no_other_service(service):
    assert offending(_package(service), [other for other in SERVICES if other != service]) == {}


# What the CLI may take from a service (issue 33): how to build and configure it (``app``, ``settings``, which also
# hold its migrations and the ERP's demo seed), the agent's context view (``context``, for `erpilot context-eval`),
# and the gateway's MCP server with its error type (`erpilot mcp` serves it over stdio). Its domain, service layer
# and adapters stay its own; what the CLI reads of a running service it asks over NATS (`erpilot audit`).
PUBLIC_ENTRY_POINTS = (*(f"{service}.{module}" for service in SERVICES for module in ("app", "settings")),
                       "erpilot_agent.context", "erpilot_gateway.mcp_server.server", "erpilot_gateway.problems")


def test_the_cli_reaches_the_services_only_through_their_public_entry_points():
    assert offending(_package("erpilot"), SERVICES, allowed=PUBLIC_ENTRY_POINTS) == {}


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_libraries_import_no_service_and_no_cli(library):
    assert offending(_package(library), (*SERVICES, "erpilot")) == {}


@pytest.mark.parametrize("package", [*SERVICES, *LIBRARIES, "erpilot"])
def test_no_production_source_reaches_for_test_support(package):
    found = offending(_package(package), TEST_SUPPORT)
    if package == "erpilot_platform":  # the test kit itself may use what the tests use
        found = {name: bad for name, bad in found.items() if not name.startswith("testing/")}
    assert found == {}


def _doubles(package) -> dict[str, list[str]]:
    root = Path(package.__file__).parent
    found = {}
    for name in imports_of(package, recursive=True):
        tree = ast.parse((root / name).read_text())
        classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        if doubles := [cls for cls in classes if DOUBLE.match(cls)]:
            found[name] = doubles
    return found


@pytest.mark.parametrize("package", [*SERVICES, *LIBRARIES, "erpilot"])
def test_no_test_double_lives_in_production_source(package):
    found = _doubles(_package(package))
    if package == "erpilot_platform":  # the memory unit of work every service's unit tests run on
        found = {name: classes for name, classes in found.items() if not name.startswith("testing/")}
    assert found == {}


def test_the_double_check_finds_one(tmp_path):
    """The check above can fail: a fake in a production package is named."""
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "ports.py").write_text("class Ledger: ...\nclass FakeLedger(Ledger): ...\n")
    package = type("P", (), {"__file__": str(tmp_path / "shop" / "__init__.py"), "__name__": "shop"})
    assert _doubles(package) == {"ports.py": ["FakeLedger"]}
