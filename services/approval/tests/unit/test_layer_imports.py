"""The approval service layer works on its ports only: no SQLAlchemy and no adapter is imported there
(``adapters.store`` implements the ports on PostgreSQL, ``adapters.memory_store`` in memory)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import erpilot_approval.service_layer

pytestmark = pytest.mark.unit


def test_the_service_layer_imports_neither_sqlalchemy_nor_an_adapter():
    found = {}
    for source in Path(erpilot_approval.service_layer.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for module in modules:
                if module.startswith(("sqlalchemy", "erpilot_approval.adapters")):
                    found.setdefault(source.name, []).append(module)
    assert found == {}
