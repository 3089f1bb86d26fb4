"""The floor under one approval cycle in this design (issue 13): CPU per hop of the libraries Erpilot is
built on, with no Erpilot code in the way, measured on this machine beside each other.

    uv run python benchmarks/hop_floor.py [--count 2000] [--json floor.json]

Three hops, each driven one at a time from this process against a separate server process, as the
services do it (on the services' event loop: uvloop, or asyncio with ``ERPILOT_EVENT_LOOP=asyncio``), on
embedded NATS (``sync_interval: always``) and embedded PostgreSQL (synchronous commit):

- ``core request``: a faststream core request/reply (queue group, a pydantic model in, a dict out), as
  a query (``ServiceBus.query``);
- ``jetstream command``: a faststream request published to a JetStream stream, pulled by a durable
  consumer one message at a time (``PullSub(batch_size=1)``), acked, the answer sent to the reply
  subject, as a command (``ServiceBus.command``);
- ``write transaction``: a SQLAlchemy 2 async (asyncpg) transaction inserting one row and one outbox
  row, as every state change does.

It prints CPU ms per hop of every process involved (client, server, NATS, PostgreSQL) and, given a
cycle's counts of each hop (``--cycle-core``, ``--cycle-jetstream``, ``--cycle-tx``; the defaults are
what `erpilot bench` counts for one approval cycle, draft included: 17 JetStream messages stored, 24 write
transactions, core requests left out), the CPU a cycle costs before any of Erpilot's own code runs.
Compare it with `erpilot bench`'s CPU per cycle and the peer's from the same minute, as ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUBJECT_CORE, SUBJECT_CMD, STREAM = "floor.query", "floor.cmd", "FLOOR"


def serve(nats_url: str) -> None:
    """The server process: one query and one durable command handler, like a service's."""
    from faststream import FastStream
    from faststream.nats import JStream, NatsBroker, PullSub
    from pydantic import BaseModel

    from erpilot_platform.runtime import run_service

    class Ping(BaseModel):
        operation_id: str
        arguments: dict

    logging.basicConfig(level=logging.WARNING)
    broker = NatsBroker(nats_url, log_level=logging.DEBUG)  # as erpilot_platform.broker: no per-message log

    @broker.subscriber(SUBJECT_CORE, queue="floor")
    async def query(body: Ping) -> dict:
        return {"ok": True, "data": {"operation_id": body.operation_id}}

    @broker.subscriber(SUBJECT_CMD, stream=JStream(STREAM), durable="floor",
                       pull_sub=PullSub(batch_size=1, timeout=1.0), max_workers=8)
    async def command(body: Ping) -> dict:
        return {"ok": True, "data": {"operation_id": body.operation_id}}

    run_service(FastStream(broker).run())


def process_cpu_ticks(pid: int) -> int:
    """CPU ticks of the process and its descendants, reaped ones included (PostgreSQL's backends)."""
    from erpilot.bench.proc import read_all_stats
    from erpilot.bench.stats import tree_ticks
    return tree_ticks(read_all_stats(), pid)


async def measure(count: int, nats_url: str, database_url: str, pids: dict[str, int]) -> dict[str, dict]:
    from faststream.nats import NatsBroker
    from sqlalchemy import Column, MetaData, String, Table, insert
    from sqlalchemy.dialects.postgresql import JSONB
    from sqlalchemy.ext.asyncio import create_async_engine

    from erpilot.bench.proc import TICKS

    broker = NatsBroker(nats_url, log_level=logging.DEBUG)
    await broker.connect()
    metadata = MetaData()
    rows = Table("floor_rows", metadata, Column("id", String, primary_key=True), Column("state", JSONB))
    outbox = Table("floor_outbox", metadata, Column("id", String, primary_key=True), Column("event", JSONB))
    engine = create_async_engine(database_url.replace("postgresql://", "postgresql+asyncpg://"), pool_size=2)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    payload = {"operation_id": "op", "arguments": {"draft_id": "D-1", "revision": 3, "lines": [["SKU-1", 2]]}}

    async def core(i: int) -> None:
        await broker.request(payload, SUBJECT_CORE, timeout=5)

    async def command(i: int) -> None:
        await broker.request(payload, SUBJECT_CMD, stream=STREAM, timeout=5)

    async def transaction(i: int) -> None:
        async with engine.begin() as conn:
            await conn.execute(insert(rows).values(id=f"r{i}-{time.monotonic_ns()}", state=payload))
            await conn.execute(insert(outbox).values(id=f"o{i}-{time.monotonic_ns()}", event=payload))

    await until_answered(core, command)
    results = {}
    for name, hop in (("core request", core), ("jetstream command", command), ("write transaction", transaction)):
        for i in range(50):  # warm caches, prepared statements and connections
            await hop(i)
        before = {role: process_cpu_ticks(pid) for role, pid in pids.items()}
        client_before, started = time.process_time(), time.perf_counter()
        for i in range(count):
            await hop(i)
        seconds = time.perf_counter() - started
        cpu = {role: (process_cpu_ticks(pid) - before[role]) * 1000 / TICKS / count for role, pid in pids.items()}
        cpu["client"] = (time.process_time() - client_before) * 1000 / count
        cpu = {role: round(ms, 3) for role, ms in cpu.items()}
        results[name] = {"cpu_ms": {**cpu, "total": round(sum(cpu.values()), 3)},
                         "latency_ms": round(seconds * 1000 / count, 3)}
    await broker.stop()
    await engine.dispose()
    return results


async def measure_into(results: dict, *args) -> None:
    results.update(await measure(*args))


async def until_answered(*hops) -> None:
    """Until the server process answers both kinds (it declares the stream and its durable consumer)."""
    import nats.errors
    for hop in hops:
        for attempt in range(600):
            try:
                await hop(0)
                break
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError, Exception):
                if attempt == 599:
                    raise
                await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000, help="hops measured of each kind")
    parser.add_argument("--cycle-core", type=float, default=0, help="core requests in one cycle")
    parser.add_argument("--cycle-jetstream", type=float, default=17, help="JetStream messages in one cycle")
    parser.add_argument("--cycle-tx", type=float, default=24, help="write transactions in one cycle")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve)

    from erpilot.stack.embedded import EmbeddedNats, EmbeddedPostgres
    from erpilot_platform.runtime import run_service
    work = Path(tempfile.mkdtemp(prefix="erpilot-floor-"))
    nats_server, postgres = EmbeddedNats(work), EmbeddedPostgres(work)
    server = None
    try:
        nats_url, database_url = nats_server.start(), postgres.start()
        server = subprocess.Popen([sys.executable, __file__, "--serve", nats_url])
        pids = {"server": server.pid, "nats": nats_server.process.pid, "postgres": postgres.process.pid}
        results = {}
        run_service(measure_into(results, args.count, nats_url, database_url, pids))
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        postgres.stop()
        nats_server.stop()
    counts = {"core request": args.cycle_core, "jetstream command": args.cycle_jetstream,
              "write transaction": args.cycle_tx}
    floor = round(sum(results[k]["cpu_ms"]["total"] * n for k, n in counts.items()), 1)
    print("| hop | latency ms | CPU ms: client / server / NATS / PostgreSQL / total | per cycle |")
    print("|---|---|---|---|")
    for name, figures in results.items():
        c = figures["cpu_ms"]
        print(f"| {name} | {figures['latency_ms']} | {c['client']} / {c['server']} / {c['nats']} / "
              f"{c['postgres']} / {c['total']} | × {counts[name]:g} |")
    print(f"\nCPU of one cycle's hops alone: {floor} ms")
    if args.json:
        args.json.write_text(json.dumps({"hops": results, "cycle_counts": counts, "cycle_floor_ms": floor}, indent=2))


if __name__ == "__main__":
    main()
