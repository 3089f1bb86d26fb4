"""The ERP domain is plain Python: no wire model reaches it (the service layer maps contract -> domain,
``erpilot_erp.service_layer.to_domain``). Only the pure money formatter of the contracts is shared."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import erpilot_erp.domain

pytestmark = pytest.mark.unit

ALLOWED = {"erpilot_contracts.money"}  # format_minor: a pure helper, the one rendering of money everywhere


def test_the_domain_imports_nothing_from_the_contracts_but_the_money_formatter():
    found = {}
    for source in Path(erpilot_erp.domain.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for module in modules:
                if module.startswith(("erpilot_contracts", "pydantic")) and module not in ALLOWED:
                    found.setdefault(source.name, []).append(module)
    assert found == {}
