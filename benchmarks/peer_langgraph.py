"""The peer of `erpilot bench --peer`: LangGraph's human-approval pattern on its PostgreSQL checkpointer.

Graph ``prepare -> approve (interrupt) -> execute -> END``; ``execute`` is an idempotent
``INSERT ... ON CONFLICT (operation_id) DO NOTHING`` (asyncpg, autocommit) into a table keyed by
``operation_id``. One cycle = ``graph.ainvoke(state, thread)`` returning ``__interrupt__``, then
``graph.ainvoke(Command(resume=True), thread)`` running ``execute`` to the end. Checkpointer:
``AsyncPostgresSaver`` over a psycopg ``AsyncConnectionPool`` (the documented production set-up), the
default durability. This is what the reference script (``../shared/bench/peer_langgraph.py``) measures,
written here so the project does not depend on it: cycles/s with N workers over distinct threads,
start -> interrupt and resume -> committed percentiles, a racing double resume, and exactly one row per
operation; plus, measured exactly as for the product (erpilot.bench.meter): CPU per cycle of this
process and of PostgreSQL, commits and write transactions per cycle, peak RSS/PSS.

It runs in a virtual environment of its own (``erpilot bench --peer`` makes ``.venv-peer`` from the
``peer`` dependency group) against a database of its own (``--database-url``, a libpq URL; the cluster
must have no other writer meanwhile). The JSON summary is the last line on stdout.

    .venv-peer/bin/python benchmarks/peer_langgraph.py --database-url postgresql://postgres@/peer?host=/sock
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict

# The bench's measuring modules (stdlib and asyncpg only) come from this repository's source tree.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from erpilot.bench.db import admin_url  # noqa: E402
from erpilot.bench.meter import Meter  # noqa: E402
from erpilot.bench.proc import read_all_stats  # noqa: E402
from erpilot.bench.stats import summary_ms  # noqa: E402

EXEC_SQL = ("INSERT INTO tool_executions (operation_id, tool, args) VALUES ($1, $2, $3) "
            "ON CONFLICT (operation_id) DO NOTHING")
TABLE_SQL = """CREATE TABLE IF NOT EXISTS tool_executions (
    operation_id uuid PRIMARY KEY, tool text NOT NULL, args jsonb NOT NULL,
    executed_at timestamptz NOT NULL DEFAULT now())"""


class ApprovalState(TypedDict, total=False):
    operation_id: str
    tool: str
    args: dict
    request: dict
    approved: bool
    result: str


class Executions:
    def __init__(self) -> None:
        self.runs = 0


def build_graph(apool, checkpointer, executions: Executions):
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def prepare(state: ApprovalState) -> dict:
        return {"request": {"operation_id": state["operation_id"], "tool": state["tool"], "args": state["args"],
                            "summary": f"{state['tool']}({', '.join(sorted(state['args']))})"}}

    def approve(state: ApprovalState) -> dict:
        return {"approved": bool(interrupt(state["request"]))}

    async def execute(state: ApprovalState) -> dict:
        if not state.get("approved"):
            return {"result": "rejected"}
        executions.runs += 1
        await apool.execute(EXEC_SQL, state["operation_id"], state["tool"], json.dumps(state["args"]))
        return {"result": "executed"}

    builder = StateGraph(ApprovalState)
    for name, node in (("prepare", prepare), ("approve", approve), ("execute", execute)):
        builder.add_node(name, node)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "approve")
    builder.add_edge("approve", "execute")
    builder.add_edge("execute", END)
    return builder.compile(checkpointer=checkpointer)


async def one_cycle(graph, op_id: str, to_interrupt: list, to_commit: list) -> None:
    from langgraph.types import Command

    config = {"configurable": {"thread_id": f"t-{op_id}"}}
    t0 = time.perf_counter()
    first = await graph.ainvoke({"operation_id": op_id, "tool": "shell.exec",
                                 "args": {"cmd": "ls -la", "cwd": "app"}}, config)
    t1 = time.perf_counter()
    if "__interrupt__" not in first:
        raise RuntimeError(f"no interrupt for {op_id}: {first!r}")
    second = await graph.ainvoke(Command(resume=True), config)
    t2 = time.perf_counter()
    if second.get("result") != "executed":
        raise RuntimeError(f"not executed {op_id}: {second!r}")
    to_interrupt.append(t1 - t0)
    to_commit.append(t2 - t1)


async def run_phase(graph, cycles: int, concurrency: int, issued: list) -> dict:
    """``concurrency`` workers, ``cycles // concurrency`` cycles each (as the reference script)."""
    to_interrupt: list[float] = []
    to_commit: list[float] = []
    per = max(1, cycles // concurrency)

    async def worker() -> None:
        for _ in range(per):
            op = str(uuid.uuid4())
            issued.append(op)
            await one_cycle(graph, op, to_interrupt, to_commit)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"concurrency": concurrency, "cycles": per * concurrency,
            "start_to_interrupt": summary_ms(to_interrupt), "resume_to_committed": summary_ms(to_commit)}


async def double_resume_probe(graph, threads: int, issued: list, executions: Executions) -> dict:
    """Resume each of ``threads`` interrupted threads twice at once (a duplicated approval)."""
    from langgraph.types import Command

    before, errors = executions.runs, 0
    for _ in range(threads):
        op = str(uuid.uuid4())
        issued.append(op)
        config = {"configurable": {"thread_id": f"t-{op}"}}
        await graph.ainvoke({"operation_id": op, "tool": "shell.exec", "args": {"cmd": "ls"}}, config)
        results = await asyncio.gather(graph.ainvoke(Command(resume=True), config),
                                       graph.ainvoke(Command(resume=True), config), return_exceptions=True)
        errors += sum(isinstance(r, BaseException) for r in results)
    return {"threads": threads, "execute_node_runs": executions.runs - before, "resume_errors": errors}


async def verify(apool, issued: list) -> dict:
    rows = await apool.fetch("SELECT operation_id::text AS op, count(*) AS c FROM tool_executions GROUP BY 1")
    counts = {r["op"]: r["c"] for r in rows}
    wanted = set(issued)
    missing = sum(1 for op in wanted if counts.get(op, 0) == 0)
    duplicates = sum(1 for c in counts.values() if c != 1)
    unexpected = sum(1 for op in counts if op not in wanted)
    return {"operations": len(wanted), "rows": sum(counts.values()), "missing": missing, "duplicates": duplicates,
            "unexpected": unexpected,
            "exactly_once": not (missing or duplicates or unexpected) and len(wanted) == len(issued)}


async def postmaster_pid(apool) -> int | None:
    """The server's postmaster (a backend's parent), if it runs on this machine and /proc shows it."""
    backend = await apool.fetchval("SELECT pg_backend_pid()")
    stats = read_all_stats()
    return stats[backend][0] if backend in stats else None


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "psycopg", "psycopg-pool",
                 "asyncpg"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    import asyncpg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    admin, database = admin_url(args.database_url)
    result: dict[str, Any] = {"bench": "peer_langgraph", "versions": versions(), "database": database,
                              "checkpointer": "AsyncPostgresSaver(AsyncConnectionPool)", "pool_size": args.pool}
    apool = await asyncpg.create_pool(args.database_url, min_size=args.pool, max_size=args.pool)
    counters = await asyncpg.connect(admin)
    try:
        await apool.execute(TABLE_SQL)
        await apool.execute("TRUNCATE tool_executions")  # a database used before: verify this run alone
        result["synchronous_commit"] = await apool.fetchval("SHOW synchronous_commit")
        postmaster = await postmaster_pid(apool)
        roles = {"peer": [os.getpid()], **({"postgres": [postmaster]} if postmaster else {})}
        executions, issued = Executions(), []
        async with AsyncConnectionPool(conninfo=args.database_url, min_size=args.pool, max_size=args.pool, open=False,
                                       kwargs={"autocommit": True, "prepare_threshold": 0,
                                               "row_factory": dict_row}) as cpool:
            await cpool.open(wait=True)
            saver = AsyncPostgresSaver(cpool)
            await saver.setup()
            graph = build_graph(apool, saver, executions)
            for level in args.levels:  # warm-up, unmeasured
                await run_phase(graph, min(args.warmup, level * 2), min(level, args.warmup), issued)
            async with Meter(roles, counters, database) as idle:
                await asyncio.sleep(args.idle_seconds)
            idle_figures = idle.result(max(1, round(args.idle_seconds)))
            result["idle_per_second"] = idle_figures
            result["levels"] = []
            for level in args.levels:
                async with Meter(roles, counters, database,
                                 idle_commits_per_second=idle_figures["commits"] or 0.0) as meter:
                    phase = await run_phase(graph, max(args.cycles, level), level, issued)
                figures = meter.result(phase["cycles"])
                phase.update(figures, cycles_per_s=figures["per_second"])
                result["levels"].append(phase)
                print(f"peer: {level} in flight: {phase['cycles_per_s']} cycles/s", file=sys.stderr, flush=True)
            result["duplicate_resume_probe"] = await double_resume_probe(graph, args.dup, issued, executions)
        result["verify"] = await verify(apool, issued)
    finally:
        await counters.close()
        await apool.close()
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="libpq URL of the peer's own database")
    parser.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 32],
                        help="workers in flight per measured phase, comma-separated (default 1,32)")
    parser.add_argument("--cycles", type=int, default=300, help="cycles per level (at least the level)")
    parser.add_argument("--warmup", type=int, default=16)
    parser.add_argument("--pool", type=int, default=16, help="connections per pool (as the reference)")
    parser.add_argument("--dup", type=int, default=20, help="threads of the double-resume probe")
    parser.add_argument("--idle-seconds", type=float, default=2.0)
    parser.add_argument("--json", action="store_true", help="only the JSON summary on stdout")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    summary = asyncio.run(main(arguments))
    if not arguments.json:
        for lvl in summary["levels"]:
            print(f"{lvl['concurrency']:>3} in flight: {lvl['cycles_per_s']} cycles/s, "
                  f"cpu {lvl['cpu_ms']} ms/cycle, commits {lvl['commits']}, write xacts {lvl['write_xacts']}")
    print(json.dumps(summary))
