"""What the modules of a package import, for the tests that keep a layer honest (a domain free of wire
models, a service layer free of SQLAlchemy and adapters, a gateway whose edges reach NATS only through its port).

Every service's ``tests/unit/test_layer_imports.py`` states its rules with ``offending``; this module reads the
source (it imports nothing it looks at), so a forbidden import is found even where it is never executed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType


def imports_of(package: ModuleType, *, recursive: bool = False, names: bool = False) -> dict[str, list[str]]:
    """Every module each source file of ``package`` imports, by its path inside the package (``pages.py``,
    ``console/pages.py``): only its own files, or (``recursive``) those of its subpackages too. A relative
    import is named by the module it resolves to. With ``names``, ``from a import b`` also counts ``a.b`` (which
    is a module when ``b`` is a submodule of the package ``a``)."""
    root = Path(package.__file__).parent
    sources = sorted(root.rglob("*.py") if recursive else root.glob("*.py"))
    if not sources:
        raise AssertionError(f"no source files in {package.__name__}: the check would prove nothing")
    found: dict[str, list[str]] = {}
    for source in sources:
        name = source.relative_to(root).as_posix()
        home = [package.__name__, *source.relative_to(root).parent.parts]  # the package the file belongs to
        modules = found.setdefault(name, [])
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                modules.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(home[:len(home) - node.level + 1])  # level 1: its own package
                source = node.module if node.level == 0 else f"{base}.{node.module}" if node.module else None
                if source is not None:
                    modules.append(source)
                if names or source is None:  # ``from . import x``: x is the module
                    modules.extend(f"{source or base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def within(module: str, *prefixes: str) -> bool:
    """Whether ``module`` is one of ``prefixes`` or lies below one (``nats.js`` is within ``nats``, ``natsort``
    is not)."""
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def offending(package: ModuleType, forbidden: Iterable[str], *, allowed: Iterable[str] = (),
              only: Iterable[str] | None = None, recursive: bool = True) -> dict[str, list[str]]:
    """The source files of ``package`` (and of its subpackages, unless not ``recursive``) that import a module
    within ``forbidden`` (and not within ``allowed``), with those imports; ``only`` limits the look to files whose
    path inside the package starts with one of its prefixes (``"routes/"``, ``"services.py"``). Empty when the
    layer keeps its rule."""
    forbidden, allowed = tuple(forbidden), tuple(allowed)
    only = None if only is None else tuple(only)
    return {name: bad for name, modules in imports_of(package, recursive=recursive).items()
            if (only is None or name.startswith(only))
            and (bad := [m for m in modules if within(m, *forbidden) and not within(m, *allowed)])}
