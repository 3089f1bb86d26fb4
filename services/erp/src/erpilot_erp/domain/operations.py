"""PREPARE and COMMIT of the write tools, dispatched through one table: ``WRITE_TOOLS``.

Each write tool is one module of this package exporting one ``plans.WriteTool`` (``TOOL``): its arguments, the rows
it reads and locks, its prepare and commit, the kind of id its commit creates and the business codes it alone
raises. The table is built from the package's modules, so adding the module is what makes the dispatchers
(``prepare``, ``commit``, ``service_layer.write_state``, ``service_layer.to_domain``) know it; none of them names a
tool.

prepare: called when the agent asks for a preview; the adapter stores ``Prepared.facts`` with the
operation and returns ``Prepared.preview``. commit: called in the commit's transaction after the grant is
verified, with the rows of ``WriteState`` locked; the adapter applies the ``CommitPlan``'s effects and records its
``result``, or records the ``BusinessError`` as the operation's rejection.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import erpilot_erp.domain
from erpilot_erp.domain.errors import ErrorCode, ToolErrorCode
from erpilot_erp.domain.plans import CommitPlan, Prepared, StockCheck, WriteState, WriteTool


def _tool_modules() -> Mapping[str, WriteTool[Any]]:
    """Every ``TOOL`` of this package's modules, by name; a name twice stops the service from loading. That they
    are exactly the catalog's write tools is a test (``tests/unit/test_operations.py``): the domain does not
    import the contracts."""
    found: dict[str, WriteTool[Any]] = {}
    for info in sorted(pkgutil.iter_modules(erpilot_erp.domain.__path__), key=lambda info: info.name):
        if info.name == __name__.rpartition(".")[2]:
            continue
        tool = getattr(importlib.import_module(f"{erpilot_erp.domain.__name__}.{info.name}"), "TOOL", None)
        if not isinstance(tool, WriteTool):
            continue
        if tool.name in found:
            raise RuntimeError(f"write tool {tool.name} is defined twice ({info.name})")
        found[tool.name] = tool
    return found


WRITE_TOOLS: Mapping[str, WriteTool[Any]] = _tool_modules()

NEW_ID_KIND: Mapping[str, str] = {name: tool.new_id_kind for name, tool in WRITE_TOOLS.items() if tool.new_id_kind}
"""Write tools whose commit creates a record, and which kind of id the adapter must pass as ``new_id``."""


def business_codes() -> list[ErrorCode | ToolErrorCode]:
    """Every business code the domain raises: the shared ones and each write tool's own."""
    return [*ErrorCode, *(code for tool in WRITE_TOOLS.values() for code in tool.error_codes)]


def write_tool(name: str) -> WriteTool[Any]:
    """The registered write tool (ValueError for any other name)."""
    tool = WRITE_TOOLS.get(name)
    if tool is None:
        raise ValueError(f"{name} is not a write tool")
    return tool


def _tool_of(write: object) -> WriteTool[Any]:
    tool = WRITE_TOOLS.get(getattr(write, "tool", ""))
    if tool is None or not isinstance(write, tool.args):
        raise ValueError(f"{write!r} is not a write")
    return tool


def prepare(write: Any, state: WriteState, now: datetime, *, stock_check: StockCheck = "exact") -> Prepared:
    """Check what can never succeed, and return the facts and preview of one write."""
    return _tool_of(write).prepare(write, state, now, stock_check)


def commit(
    write: Any, facts: Mapping[str, Any], state: WriteState, now: datetime, *,
    stock_check: StockCheck = "exact", new_id: str | None = None,
) -> CommitPlan:
    """Re-check the prepared ``facts`` against ``state`` and plan the effects (``new_id``: NEW_ID_KIND)."""
    tool = _tool_of(write)
    if tool.new_id_kind and not new_id:
        raise ValueError(f"{tool.name} needs a new {tool.new_id_kind} id")
    return tool.commit(write, facts, state, now, stock_check, new_id)
