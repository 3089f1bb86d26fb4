"""What every table of `erpilot bench` shares: the process roles in their order, cells, Markdown rows. Pure."""

from __future__ import annotations

import math

ROLES = ("gateway", "agent", "approval", "erp", "nats", "postgres")


def fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value)


def get(d: dict, *path):
    """d[path[0]][path[1]]…, or None where a key is missing."""
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(cell) if not isinstance(cell, str) else cell for cell in row) + " |"
              for row in rows]
    return lines
