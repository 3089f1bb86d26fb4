"""The agent's layers stay honest: the service layer works on its ports only (no adapter, no SQLAlchemy, no
faststream or NATS client), and the domain is plain Python (no I/O library, no platform, no other layer, no
contract message: only the tool catalog and the strict JSON reader of ``erpilot_contracts``)."""

from __future__ import annotations

import pytest

import erpilot_agent.domain
import erpilot_agent.service_layer
from erpilot_platform.testing.imports import offending

pytestmark = pytest.mark.unit

IO = ("sqlalchemy", "asyncpg", "faststream", "nats", "httpx", "openai", "socket", "asyncio", "os", "pathlib",
      "subprocess")
DOMAIN_MAY_USE = ("erpilot_contracts.tools.v1", "erpilot_contracts.json_input")


def test_the_service_layer_imports_no_adapter_no_sqlalchemy_and_no_messaging_library():
    assert offending(erpilot_agent.service_layer, ("erpilot_agent.adapters", "erpilot_agent.entrypoints",
                                                   "erpilot_agent.app", "sqlalchemy", "asyncpg", "faststream",
                                                   "nats")) == {}


def test_the_domain_imports_no_io_no_platform_no_other_layer_and_no_contract_message():
    assert offending(erpilot_agent.domain, (*IO, "erpilot_platform", "erpilot_agent.adapters",
                                            "erpilot_agent.service_layer", "erpilot_agent.entrypoints",
                                            "erpilot_contracts"), allowed=DOMAIN_MAY_USE) == {}
