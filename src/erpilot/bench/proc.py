"""What the stack's processes cost, read from Linux /proc: CPU ticks per process tree and memory.

Stdlib only (benchmarks/peer_langgraph.py uses it from the source tree, in its own virtual environment).

- CPU: ``utime + stime + cutime + cstime`` of every live process under a root (``/proc/<pid>/stat``),
  so PostgreSQL backends, also those that exited and were reaped by the postmaster, count for PostgreSQL.
- Memory: peak RSS per role is the sum of ``VmHWM`` (each process's own high-water mark) over the
  role's live processes at the end; PSS is sampled from ``/proc/<pid>/smaps_rollup`` by a thread while
  the phase runs and its largest total kept (PSS shares pages between processes fairly, RSS does not).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping

from erpilot.bench.stats import tree_ticks

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def parse_stat(line: str) -> tuple[int, int, int]:
    """(ppid, utime+stime, cutime+cstime) from one /proc/<pid>/stat line (the name may hold spaces)."""
    fields = line.rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3 of proc(5)); ppid is field 4, utime..cstime are fields 14..17
    ppid, utime, stime, cutime, cstime = (int(fields[i]) for i in (1, 11, 12, 13, 14))
    return ppid, utime + stime, cutime + cstime


def read_all_stats() -> dict[int, tuple[int, int, int]]:
    """pid -> parse_stat for every process this user can see (those that vanish while read are skipped)."""
    out: dict[int, tuple[int, int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    out[int(entry)] = parse_stat(f.read())
            except (OSError, IndexError, ValueError):
                continue
    return out


def tree_pids(stats: Mapping[int, tuple[int, int, int]], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _own, _reaped) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in out:
            out.append(pid)
            todo.extend(children.get(pid, ()))
    return out


def cpu_snapshot(roles: Mapping[str, list[int]]) -> dict[str, int]:
    """role -> CPU ticks of the process trees under the role's root pids."""
    stats = read_all_stats()
    return {role: sum(tree_ticks(stats, root) for root in roots) for role, roots in roles.items()}


def system_cpu() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            values = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return (0, 0)
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values) - idle, sum(values))


def _kib(path: str, key: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memory_now(roles: Mapping[str, list[int]]) -> dict[str, dict[str, float]]:
    """role -> {"rss_peak_mb": sum of VmHWM, "pss_mb": sum of Pss now, "processes": n}."""
    stats = read_all_stats()
    out = {}
    for role, roots in roles.items():
        pids = [pid for root in roots for pid in tree_pids(stats, root)]
        out[role] = {
            "rss_peak_mb": round(sum(_kib(f"/proc/{p}/status", "VmHWM:") for p in pids) / 1024, 1),
            "pss_mb": round(sum(_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids) / 1024, 1),
            "processes": len(pids),
        }
    return out


class PssSampler:
    """Samples memory_now every ``interval`` seconds in a thread; ``peak()`` is the largest PSS seen."""

    def __init__(self, roles: Mapping[str, list[int]], interval: float = 0.5) -> None:
        self.roles, self.interval = roles, interval
        self.peak_pss: dict[str, float] = {}
        self.last: dict[str, dict[str, float]] = {}
        self.cpu_seconds = 0.0  # this thread's own CPU: taken off a role that holds this very process
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)

    def _sample(self) -> None:
        self.last = memory_now(self.roles)
        total = sum(v["pss_mb"] for v in self.last.values())
        if total > self.peak_pss.get("total", -1.0):
            self.peak_pss = {**{role: v["pss_mb"] for role, v in self.last.items()}, "total": round(total, 1)}

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            started = time.thread_time()
            self._sample()
            self.cpu_seconds += time.thread_time() - started

    def __enter__(self) -> PssSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def report(self) -> dict[str, dict[str, float]]:
        """role -> {"rss_peak_mb", "pss_peak_mb", "processes"} plus a "total" row."""
        out = {role: {"rss_peak_mb": v["rss_peak_mb"], "pss_peak_mb": self.peak_pss.get(role, v["pss_mb"]),
                      "processes": v["processes"]} for role, v in self.last.items()}
        out["total"] = {"rss_peak_mb": round(sum(v["rss_peak_mb"] for v in out.values()), 1),
                        "pss_peak_mb": self.peak_pss.get("total", 0.0),
                        "processes": sum(v["processes"] for v in out.values())}
        return out
