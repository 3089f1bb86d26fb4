"""What `erpilot torture` crashes: every row of the table in docs/FAILPOINTS.md, in every service that row names.

The table is the one list of failpoints (`tests/unit/test_failpoints_documented.py` keeps it equal to the
code), so a failpoint added there is in the campaign without a change here. Its second column names the
service(s) that reach the point, comma-separated (e.g. `erp, approval, agent` for the outbox relay's points,
which every outbox owner reaches): each (failpoint, service) pair is one target, crashed in every round.

The installed package carries a copy of the table (`erpilot/FAILPOINTS.md`, see pyproject.toml); in a
checkout it is read from docs/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from erpilot.stack.stack import SERVICES

_ROW = re.compile(r"^\|\s*`(?P<name>[a-z_.]+)`\s*\|(?P<services>[^|]*)\|", re.M)
_CHECKOUT_COPY = Path(__file__).resolve().parents[3] / "docs" / "FAILPOINTS.md"


class TableError(ValueError):
    """The failpoint table cannot be read or names a service the campaign does not know."""


@dataclass(frozen=True)
class Target:
    """One failpoint armed in one service."""

    failpoint: str
    service: str
    shared: bool = False  # more than one service reaches this failpoint

    @property
    def label(self) -> str:
        """How the campaign names it: the failpoint, with `@service` when several services reach it."""
        return f"{self.failpoint}@{self.service}" if self.shared else self.failpoint


def table_text() -> str:
    packaged = resources.files("erpilot").joinpath("FAILPOINTS.md")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    if _CHECKOUT_COPY.is_file():
        return _CHECKOUT_COPY.read_text(encoding="utf-8")
    raise TableError(f"the failpoint table is neither in the package nor at {_CHECKOUT_COPY}")


def parse(text: str) -> list[Target]:
    """Every (failpoint, service) pair of the table, in its order."""
    found: list[Target] = []
    for row in _ROW.finditer(text):
        services = [s.strip().strip("`") for s in row["services"].split(",") if s.strip()]
        unknown = [s for s in services if s not in SERVICES]
        if not services or unknown:
            raise TableError(f"failpoint {row['name']}: the service column must list services from {SERVICES}, "
                             f"comma-separated (got {row['services'].strip()!r})")
        found += [Target(row["name"], service, shared=len(services) > 1) for service in services]
    if not found:
        raise TableError("the failpoint table has no rows")
    return found


def targets() -> list[Target]:
    return parse(table_text())


def select(available: list[Target], wanted: list[str] | None) -> list[Target]:
    """The targets named by `--failpoint` (a failpoint: every service it is armed in; or `failpoint@service`)."""
    if not wanted:
        return list(available)
    chosen: list[Target] = []
    for name in wanted:
        matches = [t for t in available if name in (t.failpoint, t.label, f"{t.failpoint}@{t.service}")]
        if not matches:
            known = ", ".join(sorted({t.failpoint for t in available}))
            raise TableError(f"unknown failpoint {name!r}; known: {known} (or NAME@SERVICE)")
        chosen += [t for t in matches if t not in chosen]
    return chosen
