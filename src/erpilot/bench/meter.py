"""One measured phase: CPU per process role, machine busy share, commits, write transactions, memory.

    async with Meter(roles, admin_connection, "erpilot", idle_commits_per_second=r) as meter:
        ... run the phase ...
    figures = meter.result(cycles)

Stdlib and asyncpg only (benchmarks/peer_langgraph.py uses it too, from the source tree).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping

from erpilot.bench.db import SETTLE_SECONDS, DbCounters, read_counters
from erpilot.bench.proc import TICKS, PssSampler, cpu_snapshot, system_cpu
from erpilot.bench.stats import busy_fraction, cpu_ms_per_unit, per_unit


class Meter:
    """Brackets a phase; ``roles`` maps a name (agent, postgres, ...) to the root pids of its processes."""

    def __init__(self, roles: Mapping[str, list[int]], connection, database: str, *,
                 idle_commits_per_second: float = 0.0, settle: float = SETTLE_SECONDS, jetstream=None) -> None:
        self.roles, self.connection, self.database = roles, connection, database
        self.jetstream = jetstream  # a nats-py JetStreamContext: count the messages every stream stored
        self.idle_commits_per_second, self.settle = idle_commits_per_second, settle
        self.sampler = PssSampler(roles)

    async def __aenter__(self) -> Meter:
        self.db_before: DbCounters = await read_counters(self.connection, self.database)
        self.streams_before = await stream_sequences(self.jetstream)
        self.sampler.__enter__()
        self.cpu_before, self.sys_before = cpu_snapshot(self.roles), system_cpu()
        self.client_before, self.started = time.process_time(), time.perf_counter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
        self.client_after = time.process_time()
        self.cpu_after, self.sys_after = cpu_snapshot(self.roles), system_cpu()
        self.next_xid_after = (await read_counters(self.connection, self.database)).next_xid
        self.streams_after = await stream_sequences(self.jetstream)
        self.sampler.__exit__()
        await asyncio.sleep(self.settle)  # let every backend flush its transaction statistics
        self.db_after: DbCounters = await read_counters(self.connection, self.database)

    def result(self, units: int) -> dict:
        """Figures per unit (a cycle, a read, or a second for an idle window)."""
        after = dict(self.cpu_after)
        for role, roots in self.roles.items():  # the sampler thread's CPU is the bench's, not the role's
            if os.getpid() in roots:
                after[role] -= round(self.sampler.cpu_seconds * TICKS)
        cpu = cpu_ms_per_unit(self.cpu_before, after, units, TICKS)
        product = round(sum(v for v in cpu.values() if v == v), 2)  # NaN-safe
        idle = self.idle_commits_per_second * self.settle
        return {
            "units": units,
            "seconds": round(self.seconds, 3),
            "per_second": round(units / self.seconds, 2) if self.seconds > 0 else None,
            "cpu_ms": {**cpu, "total": product},
            "client_cpu_ms": round((self.client_after - self.client_before - self.sampler.cpu_seconds) * 1000 / units,
                                   2) if units else None,
            "machine_busy": busy_fraction(self.sys_before, self.sys_after),
            "commits": per_unit(self.db_before.commits, self.db_after.commits, units, idle=idle),
            "rollbacks": per_unit(self.db_before.rollbacks, self.db_after.rollbacks, units),
            "write_xacts": per_unit(self.db_before.next_xid, self.next_xid_after, units),
            "jetstream_messages": {name: per_unit(self.streams_before.get(name, 0), last, units)
                                   for name, last in self.streams_after.items()},
            "memory": self.sampler.report(),
        }


async def stream_sequences(jetstream) -> dict[str, int]:
    """Each stream's last sequence: the messages it stored since, whatever its retention removed."""
    if jetstream is None:
        return {}
    return {info.config.name: info.state.last_seq for info in await jetstream.streams_info()}
