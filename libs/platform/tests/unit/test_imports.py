"""``erpilot_platform.testing.imports``, what every service's layer test stands on: it finds a forbidden import
wherever it is written (absolute, relative, inside a function, in a subpackage), and only a forbidden one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from erpilot_platform.testing.imports import imports_of, offending, within

pytestmark = pytest.mark.unit


@pytest.fixture
def package(tmp_path):
    """A package ``shop`` with a leaky service layer: adapters reached absolutely, relatively and lazily."""
    root = tmp_path / "shop"
    (root / "service_layer").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "ports.py").write_text("from typing import Protocol\n")
    (root / "service_layer" / "__init__.py").write_text("from . import orders\n")
    (root / "service_layer" / "orders.py").write_text(
        "import sqlalchemy.orm\nfrom ..adapters import sql\nfrom .. import ports\n"
        "def later():\n    from natsort import natsorted\n    import nats\n")
    return SimpleNamespace(__file__=str(root / "__init__.py"), __name__="shop")


def test_relative_imports_are_named_by_the_module_they_resolve_to(package):
    assert imports_of(package, recursive=True) == {
        "__init__.py": [], "ports.py": ["typing"], "service_layer/__init__.py": ["shop.service_layer.orders"],
        "service_layer/orders.py": ["sqlalchemy.orm", "shop.adapters", "shop.ports", "natsort", "nats"]}


def test_with_names_an_imported_name_counts_as_a_module_below_its_source(package):
    assert imports_of(package, recursive=True, names=True)["service_layer/orders.py"] == [
        "sqlalchemy.orm", "shop.adapters", "shop.adapters.sql", "shop.ports", "natsort", "natsort.natsorted", "nats"]


def test_only_the_packages_own_files_unless_recursive(package):
    assert set(imports_of(package)) == {"__init__.py", "ports.py"}


def test_a_forbidden_import_is_found_wherever_it_is_written_and_nothing_else(package):
    assert offending(package, ["sqlalchemy", "nats", "shop.adapters"], recursive=True) == {
        "service_layer/orders.py": ["sqlalchemy.orm", "shop.adapters", "nats"]}
    assert offending(package, ["sqlalchemy"], allowed=["sqlalchemy.orm"], recursive=True) == {}
    assert offending(package, ["typing"], recursive=True, only=["service_layer/"]) == {}


def test_within_goes_by_whole_names():
    assert within("nats.js.api", "nats") and within("nats", "nats") and not within("natsort", "nats")


def test_an_empty_package_proves_nothing_and_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(AssertionError, match="would prove nothing"):
        imports_of(SimpleNamespace(__file__=str(tmp_path / "empty" / "__init__.py"), __name__="empty"))
