"""Record kinds a write tool brings, one module each: its table (on ``tables.metadata``), its id sequence, its row
mapping, its loader and the applier of its effect, in one place.

A module of this package registers itself when imported: ``row_set`` puts its loader under a ``plans.Rows`` member
(``LedgerRepository.row_set`` reads it), ``applies`` puts its applier under an effect type (``repository.apply_plan``
reads ``APPLIERS``), ``id_kind`` puts its sequence under an id kind (``WriteTool.new_id_kind``). Every module is
imported at the end of this file, and ``adapters.tables`` imports this package, so whatever sees the ERP's metadata
(the service, Alembic's ``env.py``, the schema test) sees every record kind's table too. That every effect, row set
and id kind has its entry is ``tests/unit/test_record_registry.py``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy import Sequence
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_erp.domain.plans import Effect, Rows

Applier = Callable[[AsyncConnection, Any, str], Awaitable[None]]
"""``(conn, effect, operation_id)``: write one effect in the commit's transaction."""
Loader = Callable[[AsyncConnection, str], Awaitable[list[Any]]]
"""``(conn, key)``: the records of one row set (for ``Rows.of_order``, the key is the order's id), oldest first."""

APPLIERS: dict[type[Effect], Applier] = {}
ROW_SETS: dict[Rows, Loader] = {}
ID_SEQUENCES: dict[str, tuple[Sequence, str]] = {}
"""Each id kind a record module brings, with its sequence and prefix (``tables.ID_SEQUENCES`` holds the core's)."""

F = TypeVar("F", bound=Callable[..., Any])


def _once(table: dict[Any, Any], key: Any, value: Any) -> None:
    if key in table and table[key] is not value:
        raise RuntimeError(f"{key!r} is registered twice")  # two modules claiming one effect or row set
    table[key] = value


def applies(effect_type: type[Effect]) -> Callable[[F], F]:
    """Register the decorated ``async (conn, effect, operation_id)`` as the applier of ``effect_type``."""
    def register(apply: F) -> F:
        _once(APPLIERS, effect_type, apply)
        return apply
    return register


def row_set(kind: Rows) -> Callable[[F], F]:
    """Register the decorated ``async (conn, key) -> list`` as the loader of row set ``kind``."""
    def register(load: F) -> F:
        _once(ROW_SETS, kind, load)
        return load
    return register


def id_kind(kind: str, sequence: Sequence, prefix: str) -> None:
    """Register the sequence and prefix of a record kind's ids (``CN-9101``)."""
    _once(ID_SEQUENCES, kind, (sequence, prefix))


for _info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
    importlib.import_module(f"{__name__}.{_info.name}")
