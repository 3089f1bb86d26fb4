"""The approval service layer works on its ports only: no SQLAlchemy and no adapter is imported there
(``adapters.store`` implements the ports on PostgreSQL, ``adapters.memory_store`` in memory)."""

from __future__ import annotations

import pytest

import erpilot_approval.service_layer
from erpilot_platform.testing.imports import imports_of

pytestmark = pytest.mark.unit


def test_the_service_layer_imports_neither_sqlalchemy_nor_an_adapter():
    found = {name: bad for name, modules in imports_of(erpilot_approval.service_layer).items()
             if (bad := [m for m in modules if m.startswith(("sqlalchemy", "erpilot_approval.adapters"))])}
    assert found == {}
