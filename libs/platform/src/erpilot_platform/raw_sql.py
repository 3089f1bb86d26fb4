"""Helpers for the SQL text of hot statements run straight on asyncpg (``db.driver_connection``, issue 31 item 4):
their column lists and values come from the same SQLAlchemy ``Table`` the schema and the cold statements use."""

from __future__ import annotations

import functools
import json
from typing import Any

from sqlalchemy import JSON, Table


def columns(table: Table, alias: str | None = None) -> str:
    """Every column of ``table``, quoted (``grant`` is a keyword), in the table's order."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f'{prefix}"{c.name}"' for c in table.c)


def column_names(names: tuple[str, ...]) -> str:
    return ", ".join(f'"{name}"' for name in names)


@functools.cache
def _json_columns(table: Table) -> frozenset[str]:
    return frozenset(c.name for c in table.c if isinstance(c.type, JSON))


def value(table: Table, name: str, value: Any) -> Any:
    """A column's value as asyncpg takes it: JSON as text (None too: SQLAlchemy's JSON type stores JSON null for
    None, and so does this: the codec SQLAlchemy's dialect sets takes text), the rest as it is."""
    return json.dumps(value) if name in _json_columns(table) else value


def values(table: Table, names: tuple[str, ...], row: dict[str, Any]) -> list[Any]:
    """``row``'s values of ``names``, in that order, as asyncpg takes them."""
    return [value(table, name, row[name]) for name in names]
