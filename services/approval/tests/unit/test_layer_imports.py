"""The approval service's layers (ARCHITECTURE "Layers"): the domain is plain Python with no I/O and no wire
message; the service layer works on its ports only, with no SQLAlchemy, no broker and no adapter (``adapters``
implement the ports on PostgreSQL and NATS, ``tests/fakes.py`` in memory)."""

from __future__ import annotations

import pytest

import erpilot_approval.domain
import erpilot_approval.service_layer
from erpilot_platform.testing.imports import offending

pytestmark = pytest.mark.unit

IO = ("sqlalchemy", "asyncpg", "faststream", "nats", "httpx", "erpilot_platform.db", "erpilot_platform.uow",
      "erpilot_platform.broker", "erpilot_platform.outbox")
# The contracts' wire messages (the service layer maps them to and from the domain's dataclasses); the tool
# catalog and the fingerprint are pure functions the domain shares with every service.
MESSAGES = ("erpilot_contracts.approval", "erpilot_contracts.agent", "erpilot_contracts.erp",
            "erpilot_contracts.sessions", "erpilot_contracts.base", "erpilot_contracts.requests",
            "erpilot_contracts.subjects", "pydantic")


def test_the_domain_imports_no_io_and_no_wire_message():
    assert offending(erpilot_approval.domain, (*IO, *MESSAGES, "erpilot_approval.service_layer",
                                               "erpilot_approval.adapters")) == {}


def test_the_service_layer_imports_neither_sqlalchemy_nor_a_broker_nor_an_adapter():
    assert offending(erpilot_approval.service_layer, ("sqlalchemy", "asyncpg", "faststream", "nats",
                                                      "erpilot_platform.db", "erpilot_platform.outbox",
                                                      "erpilot_approval.adapters", "erpilot_approval.entrypoints",
                                                      "erpilot_approval.app")) == {}
