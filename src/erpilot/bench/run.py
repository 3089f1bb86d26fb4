"""`erpilot bench`: the approval cycle end to end, per concurrency level, and what it costs.

Per level: cycles/s (draft included), p50/p90/p99 of request → ``approval_pending`` and decision →
``tool_finished``, the read tool call (``get_product`` via ``POST …/tool-calls``), CPU per cycle of
every process role (gateway, agent, approval, ERP, NATS, PostgreSQL backends included: ``proc``),
database commits and write transactions per cycle (``db``), JetStream messages stored per cycle by
stream, peak RSS and PSS; an idle window first (CPU, commits and memory of the idle stack just started)
and another after the levels, once the pools gave back the connections only the load needed (the warm stack's
memory). ``--peer`` then runs both peers (``peer``):
LangGraph on the same PostgreSQL, then, with the stack stopped, DBOS on a PostgreSQL of its own, and
``compare`` prints Erpilot beside them with ratios and the targets of issue 31.

By default it starts its own stack (embedded NATS with ``sync_interval: always``, embedded PostgreSQL,
every service as a process, the default policy and log level, as ``erpilot up`` runs them) in a temp
dir and seeds one product per worker. Only loopback addresses and unix sockets are contacted.
``--cluster 3 --replicas 2``: on a local three-node NATS cluster with two processes of every service.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import uuid
from pathlib import Path

import asyncpg
import nats

from erpilot.bench import load
from erpilot.bench.db import admin_url
from erpilot.bench.meter import Meter
from erpilot.bench.stats import net_of_idle, summary_ms
from erpilot.stack import stack, tokens
from erpilot_platform.db import IDLE_SESSION_SECONDS

IDLE_SECONDS = 5.0
SETTLE_SECONDS = 3.0  # after the pools' idle timeout, for the backends to exit
STOCK = 10_000_000


async def seed_bench_products(database_url: str, count: int) -> None:
    """One product per worker, in stock for any run (cheap: 100 minor units, no manager rule)."""
    connection = await asyncpg.connect(admin_url(database_url, admin_url(database_url)[1])[0])
    try:
        await connection.executemany(
            "INSERT INTO erp.products (sku, name, status, price_minor, currency, on_hand) "
            "VALUES ($1, $2, 'active', 100, 'EUR', $3) ON CONFLICT (sku) DO NOTHING",
            [(sku, f"Benchmark product {sku}", STOCK) for sku in load.bench_skus(count)])
    finally:
        await connection.close()


def process_roles(running: stack.Stack, nats_server, postgres) -> dict[str, list[int]]:
    """role -> root pids: each service's processes (replicas too), the NATS node(s), the postmaster."""
    roles: dict[str, list[int]] = {}
    for name, child in running.supervisor.children.items():
        if child.pid:
            roles.setdefault(name.split("-")[0], []).append(child.pid)
    nodes = getattr(nats_server, "nodes", [nats_server])
    roles["nats"] = [node.process.pid for node in nodes if node.process]
    roles["postgres"] = [postgres.process.pid]
    return roles


async def measure_level(meter_args: dict, idle: dict, clients: load.Clients, watch: load.EventWatch, level: int,
                        cycles: int, reads: int, skus: list[str]) -> dict:
    workers = min(level, len(skus))
    sessions = await load.new_sessions(clients, workers)
    await load.run_workers(workers, 1, load.cycle_body(clients, watch, sessions, skus))  # warm-up
    per_worker = math.ceil(max(cycles, level) / workers)
    async with Meter(**meter_args) as meter:
        samples = await load.run_workers(workers, per_worker, load.cycle_body(clients, watch, sessions, skus))
    result = {"concurrency": level, "workers": workers, "cycles": samples.done, "failures": len(samples.failures),
              "first_failure": samples.failures[0] if samples.failures else None,
              **meter.result(max(1, samples.done))}
    result["cycles_per_s"] = result.pop("per_second")
    result["net_of_idle"] = net_of_idle(result, idle)
    result["stages"] = {name: summary_ms(samples.stages[name]) for name in load.CYCLE_STAGES}
    read_per_worker = math.ceil(max(reads, level) / workers)
    async with Meter(**meter_args) as read_meter:
        read_samples = await load.run_workers(workers, read_per_worker, load.read_body(clients, sessions, skus))
    reads_figures = read_meter.result(max(1, read_samples.done))
    result["reads"] = {"done": read_samples.done, "failures": len(read_samples.failures),
                       "per_s": reads_figures["per_second"],
                       "tool_call": summary_ms(read_samples.stages["read_tool_call"]),
                       "cpu_ms": reads_figures["cpu_ms"], "commits": reads_figures["commits"],
                       "write_xacts": reads_figures["write_xacts"],
                       "jetstream_messages": reads_figures["jetstream_messages"],
                       "net_of_idle": net_of_idle(reads_figures, idle)}
    if level == 1:
        result["reads"]["direct_get"] = summary_ms(await load.direct_reads(clients, skus, max(reads, 20)))
    return result


async def run_levels(running: stack.Stack, roles: dict[str, list[int]], nats_url: str, database_url: str,
                     secret: str, levels: list[int], cycles: int, reads: int, skus: list[str]) -> dict:
    admin, database = admin_url(database_url)
    counters = await asyncpg.connect(admin)
    connection = await nats.connect(servers=[url.strip() for url in nats_url.split(",")])
    watch = load.EventWatch()
    await connection.subscribe("erpilot.v1.sessions.*.events", cb=watch.on_event)
    clients = load.Clients(running.gateway_urls, tokens.make_token(secret, "bench-requester", ["requester"]),
                           tokens.make_token(secret, "bench-approver", ["approver"]), max(levels))
    try:
        jetstream = connection.jetstream()
        async with Meter(roles, counters, database, jetstream=jetstream) as idle:
            await asyncio.sleep(IDLE_SECONDS)
        idle_figures = idle.result(round(IDLE_SECONDS))
        meter_args = {"roles": roles, "connection": counters, "database": database,
                      "idle_commits_per_second": idle_figures["commits"], "jetstream": jetstream}
        out = {"idle_per_second": idle_figures, "levels": []}
        for level in levels:
            out["levels"].append(await measure_level(meter_args, idle_figures, clients, watch, level, cycles, reads,
                                                     skus))
        # What the warm stack keeps, once it had the time to give back what only the load needed: the database
        # closes pooled connections idle IDLE_SESSION_SECONDS (issue 31 item 5).
        await asyncio.sleep(IDLE_SESSION_SECONDS + SETTLE_SECONDS)
        async with Meter(roles, counters, database, jetstream=jetstream) as warm:
            await asyncio.sleep(IDLE_SECONDS)
        out["idle_warm_per_second"] = warm.result(round(IDLE_SECONDS))
        return out
    finally:
        await clients.aclose()
        await connection.close()
        await counters.close()


async def create_database(database_url: str, name: str) -> None:
    connection = await asyncpg.connect(admin_url(database_url)[0])
    try:
        if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()


def run_bench(levels: list[int], cycles: int, data_dir: Path | None, *, cluster: int = 0, replicas: int = 1,
              reads: int = 64, peer: bool = False, peer_cycles: int = 300, env: dict[str, str] | None = None) -> dict:
    """Start a stack, measure every level, stop it; with ``peer`` the LangGraph peer after it on the same
    PostgreSQL, then, everything of the stack stopped, the DBOS peer (it starts a PostgreSQL of its own)."""
    from erpilot.bench.peer import ensure_peer_env, peer_database_url, run_dbos, run_langgraph, shared_peers_dir
    from erpilot.stack.embedded import EmbeddedNats, EmbeddedNatsCluster, EmbeddedPostgres

    if peer:  # fail before the long part, not after it
        peer_python = ensure_peer_env()
        shared_peers_dir()
    work = Path(data_dir or tempfile.mkdtemp(prefix="erpilot-bench-"))
    nats_server = EmbeddedNatsCluster(work / "nats-cluster", cluster) if cluster else EmbeddedNats(work)
    postgres = EmbeddedPostgres(work)
    secret = "bench-" + uuid.uuid4().hex
    skus = load.bench_skus(max(levels))
    running = None
    try:
        nats_url, database_url = nats_server.start(), postgres.start()
        stack.migrate_all(database_url)
        stack.seed(database_url)
        asyncio.run(seed_bench_products(database_url, len(skus)))
        running = stack.Stack(nats_url, database_url, work, http_port=stack.free_port(),
                              env={"ERPILOT_AUTH_SECRET": secret, **(env or {})},
                              replicas=dict.fromkeys(stack.SERVICES, replicas), nats_replicas=cluster or 1)
        running.start()
        running.wait_ready()
        roles = process_roles(running, nats_server, postgres)
        result = asyncio.run(run_levels(running, roles, nats_url, database_url, secret, levels, cycles, reads, skus))
        result["machine"] = machine_info()
        if peer:
            running.stop()
            running = None
            asyncio.run(create_database(database_url, "peer"))
            result["peers"] = {"LangGraph": run_langgraph(peer_python, peer_database_url(database_url), levels,
                                                          peer_cycles)}
    finally:
        if running is not None:
            running.stop()
        postgres.stop()
        nats_server.stop()
    if peer:
        result["peers"]["DBOS"] = run_dbos(peer_python, levels, peer_cycles)
    return result


def machine_info() -> dict:
    import os
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "python": platform.python_version()}
