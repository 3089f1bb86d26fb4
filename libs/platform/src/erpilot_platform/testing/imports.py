"""What the modules of a package import, for the tests that keep a layer honest (a domain free of wire
models, a service layer free of SQLAlchemy and adapters)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType


def imports_of(package: ModuleType) -> dict[str, list[str]]:
    """Every module each source file of ``package`` (not its subpackages) imports, by file name."""
    sources = sorted(Path(package.__file__).parent.glob("*.py"))
    if not sources:
        raise AssertionError(f"no source files in {package.__name__}: the check would prove nothing")
    found: dict[str, list[str]] = {}
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom):
                found.setdefault(source.name, []).append(node.module or "")
            elif isinstance(node, ast.Import):
                found.setdefault(source.name, []).extend(alias.name for alias in node.names)
    return found
