"""The ERP's layers stay honest: the domain is plain Python (no I/O, no wire model but the pure money
formatter), and the service layer works on its ports only (no SQLAlchemy, no faststream, no adapter)."""

from __future__ import annotations

import pytest

import erpilot_erp.domain
import erpilot_erp.service_layer
from erpilot_platform.testing.imports import offending

pytestmark = pytest.mark.unit

DOMAIN_MAY_USE = ("erpilot_contracts.money",)  # format_minor: a pure helper, the one rendering of money everywhere
IO = ("sqlalchemy", "faststream", "nats", "asyncpg", "httpx", "erpilot_platform", "erpilot_erp.adapters",
      "erpilot_erp.service_layer", "erpilot_erp.entrypoints")


def test_the_domain_imports_no_io_and_nothing_from_the_contracts_but_the_money_formatter():
    assert offending(erpilot_erp.domain, (*IO, "erpilot_contracts", "pydantic"), allowed=DOMAIN_MAY_USE) == {}


def test_the_service_layer_imports_neither_sqlalchemy_nor_faststream_nor_an_adapter():
    assert offending(erpilot_erp.service_layer, ("sqlalchemy", "faststream", "nats", "asyncpg", "erpilot_erp.adapters",
                                                 "erpilot_erp.entrypoints", "erpilot_erp.app")) == {}
