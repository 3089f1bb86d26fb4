"""Pure arithmetic of `erpilot bench`: percentiles, per-cycle deltas, ratios. No I/O, stdlib only.

benchmarks/peer_langgraph.py imports this module from the source tree too (it runs in a virtual
environment of its own, without the project installed), so both sides compute every figure alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

PERCENTILES = (50, 90, 99)


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of the values; NaN if there are none."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = math.ceil(q / 100.0 * len(ordered))  # the smallest value with at least q% of them at or below it
    return ordered[max(1, min(len(ordered), rank)) - 1]


def summary_ms(samples_s: Iterable[float]) -> dict[str, float]:
    """n, p50/p90/p99, max and mean in milliseconds of samples in seconds; {} if there are none."""
    samples = list(samples_s)
    if not samples:
        return {}
    out: dict[str, float] = {"n": len(samples)}
    for q in PERCENTILES:
        out[f"p{q}_ms"] = round(percentile(samples, q) * 1e3, 3)
    out["max_ms"] = round(max(samples) * 1e3, 3)
    out["mean_ms"] = round(sum(samples) / len(samples) * 1e3, 3)
    return out


def tree_ticks(stats: Mapping[int, tuple[int, int, int]], root: int) -> int:
    """CPU clock ticks of ``root`` and every live descendant in ``stats`` (pid -> (ppid, own, reaped)).

    ``own`` is utime+stime, ``reaped`` cutime+cstime: the CPU of children the process has already
    waited for (a PostgreSQL backend that disconnected is reaped by the postmaster), so the sum over
    the live tree counts exited descendants as well.
    """
    children: dict[int, list[int]] = {}
    for pid, (ppid, _own, _reaped) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in stats:
            continue
        seen.add(pid)
        _ppid, own, reaped = stats[pid]
        total += own + reaped
        todo.extend(children.get(pid, ()))
    return total


def cpu_ms_per_unit(before: Mapping[str, int], after: Mapping[str, int], units: int,
                    ticks_per_second: int) -> dict[str, float]:
    """Per-role CPU milliseconds per unit (cycle, read) from tick totals; roles missing before start at 0.

    A role whose total went down (a process restarted, its reaped CPU lost) gets NaN: no honest figure.
    """
    if units <= 0:
        return {}
    out: dict[str, float] = {}
    for role, ticks in after.items():
        delta = ticks - before.get(role, 0)
        out[role] = math.nan if delta < 0 else round(delta * 1000 / ticks_per_second / units, 2)
    return out


def per_unit(before: float, after: float, units: int, *, idle: float = 0.0) -> float:
    """(after - before - idle) / units, rounded; ``idle`` is what the idle stack did in the window's
    extra settle time (see ``db``: statistics are flushed up to a second late)."""
    if units <= 0:
        return math.nan
    return round(max(0.0, after - before - idle) / units, 2)


def ratio(ours: float | None, peer: float | None) -> float | None:
    """ours / peer, or None when either side has no figure (or the peer's is 0)."""
    if ours is None or peer is None or peer == 0 or math.isnan(ours) or math.isnan(peer):
        return None
    return round(ours / peer, 2)


def busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Share of the machine's CPU time that was busy between two (busy, total) /proc/stat readings."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 3) if total > 0 else math.nan


def net_of_idle(figures: dict, idle: dict) -> dict:
    """CPU ms and commits per unit less what the idle stack spends in the same time (its pollers)."""
    units, seconds = figures["units"], figures["seconds"]
    return {"cpu_ms": round(figures["cpu_ms"]["total"] - idle["cpu_ms"]["total"] * seconds / units, 2),
            "commits": round(figures["commits"] - (idle["commits"] or 0.0) * seconds / units, 2)}
