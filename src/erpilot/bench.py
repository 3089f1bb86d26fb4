"""`erpilot bench`: end-to-end approval cycles per second, with p50/p99 of each stage.

A cycle is what a person lives through: a write tool call → its pending approval visible on the
session's event stream → a decision → the committed result. By default the benchmark starts its own
stack (embedded NATS and PostgreSQL, every service as a process) with `stock_check = "sufficient"`, so
concurrent orders on one product do not reject each other; with ERPILOT_NATS_URL / ERPILOT_DATABASE_URL
it uses those servers. Only loopback addresses are ever contacted.

``--cluster 3 --replicas 2``: the same on a local three-node NATS cluster (streams with three replicas,
``sync_interval: always`` on every node) with two processes of every service; the cycles are spread
over both gateways.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import nats

from erpilot import stack, tokens

STAGES = ("request", "pending_visible", "decision", "committed", "cycle")
SKUS = ("SKU-PAPER-A4", "SKU-PAPER-A3", "SKU-PEN-BLUE", "SKU-MARKER-SET", "SKU-COFFEE-1KG")


@dataclass
class Timings:
    stages: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    failures: list[str] = field(default_factory=list)


class EventWatch:
    """Sees every session event on NATS and wakes whoever waits for (call_id, type)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.waiters: dict[tuple[str, str], asyncio.Future] = {}

    async def on_event(self, msg) -> None:
        event = json.loads(msg.data)
        key = (event["data"].get("call_id", ""), event["type"])
        self.seen.setdefault(key, time.perf_counter())
        if key in self.waiters and not self.waiters[key].done():
            self.waiters[key].set_result(self.seen[key])

    async def wait(self, call_id: str, type_: str, timeout: float = 60.0) -> float:
        key = (call_id, type_)
        if key in self.seen:
            return self.seen[key]
        future = self.waiters.setdefault(key, asyncio.get_running_loop().create_future())
        return await asyncio.wait_for(future, timeout)


async def one_cycle(client: httpx.AsyncClient, approver: httpx.AsyncClient, watch: EventWatch, timings: Timings,
                    index: int) -> None:
    session = (await client.post("/v1/sessions", json={})).json()["session_id"]
    sku = SKUS[index % len(SKUS)]
    drafted = await client.post(f"/v1/sessions/{session}/tool-calls", json={
        "tool": "create_order_draft", "arguments": {"customer_id": "C-1001", "lines": [{"sku": sku, "qty": 1}]}})
    revision = drafted.json()["result"]
    call_id = f"bench-{uuid.uuid4().hex}"
    start = time.perf_counter()
    response = await client.post(f"/v1/sessions/{session}/tool-calls", json={
        "tool": "submit_order", "call_id": call_id,
        "arguments": {"draft_id": revision["draft_id"], "revision": revision["revision"]}})
    requested = time.perf_counter()
    if response.status_code != 202:
        timings.failures.append(f"request {response.status_code}: {response.text[:200]}")
        return
    pending = response.json()
    visible = await watch.wait(call_id, "approval_pending")
    decided_at = time.perf_counter()
    decision = await approver.post(f"/v1/approvals/{pending['pending_id']}/decision",
                                   json={"action": "approve", "fingerprint": pending["fingerprint"]})
    decided = time.perf_counter()
    if decision.status_code != 200:
        timings.failures.append(f"decision {decision.status_code}: {decision.text[:200]}")
        return
    committed = await watch.wait(call_id, "tool_finished")
    for name, value in (("request", requested - start), ("pending_visible", visible - start),
                        ("decision", decided - decided_at), ("committed", committed - decided),
                        ("cycle", committed - start)):
        timings.stages[name].append(value * 1000)


async def run_level(base_urls: list[str], nats_url: str, secret: str, concurrency: int, cycles: int) -> dict:
    requester = tokens.make_token(secret, "bench-requester", ["requester"])
    approver_token = tokens.make_token(secret, "bench-approver", ["approver"])
    watch, timings = EventWatch(), Timings()
    connection = await nats.connect(servers=[url.strip() for url in nats_url.split(",")])
    await connection.subscribe("erpilot.v1.sessions.*.events", cb=watch.on_event)
    limits = httpx.Limits(max_connections=concurrency * 2)
    clients = [(httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {requester}"},
                                  timeout=60, limits=limits),
                httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {approver_token}"},
                                  timeout=60, limits=limits)) for url in base_urls]
    try:
        gate = asyncio.Semaphore(concurrency)

        async def guarded(index: int) -> None:
            client, approver = clients[index % len(clients)]  # spread over every gateway replica
            async with gate:
                try:
                    await one_cycle(client, approver, watch, timings, index)
                except Exception as exc:
                    timings.failures.append(repr(exc))

        started = time.perf_counter()
        await asyncio.gather(*(guarded(i) for i in range(cycles)))
        elapsed = time.perf_counter() - started
    finally:
        for pair in clients:
            for client in pair:
                await client.aclose()
    await connection.close()
    done = len(timings.stages["cycle"])
    return {"concurrency": concurrency, "cycles": done, "failures": len(timings.failures),
            "first_failure": timings.failures[0] if timings.failures else None,
            "cycles_per_second": round(done / elapsed, 2),
            "stages_ms": {name: percentiles(timings.stages[name]) for name in STAGES}}


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"p50": round(statistics.median(ordered), 1), "p99": round(p99, 1)}


def run_bench(levels: list[int], cycles: int, data_dir: Path | None, *, cluster: int = 0,
              replicas: int = 1) -> list[dict]:
    from erpilot.embedded import EmbeddedNats, EmbeddedNatsCluster, EmbeddedPostgres

    work = Path(data_dir or tempfile.mkdtemp(prefix="erpilot-bench-"))
    nats_server = EmbeddedNatsCluster(work / "nats-cluster", cluster) if cluster else EmbeddedNats(work)
    postgres = EmbeddedPostgres(work)
    secret = "bench-" + uuid.uuid4().hex
    policy = work / "policy.toml"
    policy.write_text('[tools.submit_order]\nstock_check = "sufficient"\n')
    running = None
    try:
        nats_url, database_url = nats_server.start(), postgres.start()
        stack.migrate_all(database_url)
        stack.seed(database_url)
        running = stack.Stack(nats_url, database_url, work, http_port=stack.free_port(), env={
            "ERPILOT_AUTH_SECRET": secret, "ERPILOT_POLICY": str(policy), "ERPILOT_LOG_LEVEL": "WARNING"},
            replicas=dict.fromkeys(stack.SERVICES, replicas), nats_replicas=cluster or 1)
        running.start()
        running.wait_ready()
        return [asyncio.run(run_level(running.gateway_urls, nats_url, secret, level, max(cycles, level)))
                for level in levels]
    finally:
        if running is not None:
            running.stop()
        postgres.stop()
        nats_server.stop()


def print_report(results: list[dict]) -> None:
    """One line per concurrency level: cycles/s, then p50/p99 in ms for every stage."""
    print(f"{'conc':>5} {'cycles':>6} {'fail':>4} {'cycles/s':>9}  " + "  ".join(f"{s:>22}" for s in STAGES))
    for r in results:
        cells = []
        for stage in STAGES:
            p = r["stages_ms"].get(stage, {})
            cells.append(f"{p.get('p50', '-'):>10} / {p.get('p99', '-'):<9}")
        head = f"{r['concurrency']:>5} {r['cycles']:>6} {r['failures']:>4} {r['cycles_per_second']:>9}  "
        print(head + "  ".join(cells))
        if r["first_failure"]:
            print(f"      first failure: {r['first_failure']}")
    print("(stages: p50 / p99 ms; pending_visible and cycle are measured from the tool-call request)")
