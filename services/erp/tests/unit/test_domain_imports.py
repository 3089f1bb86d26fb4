"""The ERP domain is plain Python: no wire model reaches it (the service layer maps contract -> domain,
``erpilot_erp.service_layer.to_domain``). Only the pure money formatter of the contracts is shared."""

from __future__ import annotations

import pytest

import erpilot_erp.domain
from erpilot_platform.testing.imports import imports_of

pytestmark = pytest.mark.unit

ALLOWED = {"erpilot_contracts.money"}  # format_minor: a pure helper, the one rendering of money everywhere


def test_the_domain_imports_nothing_from_the_contracts_but_the_money_formatter():
    found = {name: bad for name, modules in imports_of(erpilot_erp.domain).items()
             if (bad := [m for m in modules if m.startswith(("erpilot_contracts", "pydantic")) and m not in ALLOWED])}
    assert found == {}
