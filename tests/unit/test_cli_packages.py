"""``src/erpilot`` shows its structure: each part is a package (``erpilot/__init__.py`` says which and why), each
package imports only the packages below it in ``MAY_IMPORT``, and no module imports another that imports it back,
directly or round a longer loop (imports are read from the source, lazy ones inside functions included)."""

from __future__ import annotations

import pytest

import erpilot
from erpilot_platform.testing.imports import imports_of

pytestmark = pytest.mark.unit

# What each part may use of the others: the CLI everything, the tools the stack (and the crash campaign the
# operator's audit check), the stack and the offline parts nothing.
MAY_IMPORT = {
    "cli": {"stack", "ops", "torture", "bench", "context_eval", "asyncapi", "mcp_stdio"},
    "torture": {"stack", "ops"},
    "bench": {"stack"},
    "ops": {"stack"},
    "stack": set(),
    "context_eval": set(),
    "asyncapi": set(),
    "mcp_stdio": set(),
}


def _module(path: str) -> str:
    """``stack/up.py`` → ``erpilot.stack.up``; ``cli/__init__.py`` → ``erpilot.cli``."""
    parts = path.removesuffix(".py").split("/")
    return ".".join(["erpilot", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def _part(module: str) -> str | None:
    """The part a module of ``erpilot`` belongs to (``erpilot.__main__`` is the CLI's); None for ``erpilot``."""
    name = module.split(".")[1] if module.count(".") else None
    return "cli" if name == "__main__" else name


def module_graph() -> dict[str, set[str]]:
    """Each module of ``erpilot`` with the modules of ``erpilot`` it imports (``from erpilot.x import y`` counts
    ``erpilot.x.y`` when that is a module, else ``erpilot.x``)."""
    modules = {_module(path): imported for path, imported in imports_of(erpilot, recursive=True, names=True).items()}
    graph: dict[str, set[str]] = {}
    for module, imported in modules.items():
        graph[module] = {name for name in imported if name in modules and name != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One loop of ``graph`` (its nodes, the first repeated at the end), or [] when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for after in sorted(graph.get(node, ())):
            if state.get(after) == 1:
                return path[path.index(after):] + [after]
            if after not in state and (loop := visit(after)):
                return loop
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (loop := visit(node)):
            return loop
    return []


def part_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    parts: dict[str, set[str]] = {}
    for module, imported in graph.items():
        if (part := _part(module)) is not None:
            parts.setdefault(part, set()).update(p for name in imported if (p := _part(name)) not in (None, part))
    return parts


def test_every_part_is_declared_and_imports_only_what_it_may():
    parts = part_graph(module_graph())
    assert set(parts) == set(MAY_IMPORT)
    assert {part: sorted(used - MAY_IMPORT[part]) for part, used in parts.items() if used - MAY_IMPORT[part]} == {}


def test_no_module_imports_another_that_imports_it_back():
    assert find_cycle(module_graph()) == []


def test_the_parts_form_no_loop():
    assert find_cycle(part_graph(module_graph())) == []


def test_a_loop_is_found():
    """The checks above can fail: a loop of three, and one of a package with itself through two modules."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"cli": {"cli.ops"}, "cli.ops": {"cli"}}) == ["cli", "cli.ops", "cli"]
