"""The load `erpilot bench` puts on a running stack: approval cycles and read tool calls over HTTP.

A cycle is what a person lives through, draft included (with the default ``stock_check = "exact"`` a
draft made before another commit on its product goes stale, so each worker owns one product and drafts
just before its cycle): ``create_order_draft`` → ``submit_order`` (202, pending) → ``approval_pending``
on the session's events → a decision → ``tool_finished``. Events are seen on NATS
(``erpilot.v1.sessions.*.events``), stamped when they arrive.

Timed, per cycle: ``request_to_pending`` (submit sent → ``approval_pending`` seen; the peer's
start → interrupt), ``decision_to_finished`` (decision sent → ``tool_finished`` seen; the peer's
resume → committed), ``draft``, ``request`` (submit → its 202), ``decision`` (→ its 200), ``cycle``.
A read is ``get_product`` through ``POST /v1/sessions/{sid}/tool-calls`` (the model's path), beside a
direct ``GET /v1/erp/products/{sku}``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import defaultdict

import httpx

CUSTOMER = "C-1001"
CYCLE_STAGES = ("request_to_pending", "decision_to_finished", "draft", "request", "decision", "cycle")


def bench_skus(count: int) -> list[str]:
    """One product per worker, seeded by the benchmark with stock that does not run out."""
    return [f"SKU-BENCH-{i:04d}" for i in range(count)]


class EventWatch:
    """Sees every session event on NATS and wakes whoever waits for (call_id, type)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.waiters: dict[tuple[str, str], asyncio.Future] = {}

    async def on_event(self, msg) -> None:
        event = json.loads(msg.data)
        key = (event.get("data", {}).get("call_id", ""), event.get("type", ""))
        self.seen.setdefault(key, time.perf_counter())
        waiter = self.waiters.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(self.seen[key])

    async def wait(self, call_id: str, type_: str, timeout: float = 60.0) -> float:
        key = (call_id, type_)
        if key in self.seen:
            return self.seen.pop(key)
        future = self.waiters.setdefault(key, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self.seen.pop(key, None)


class Clients:
    """A requester and an approver HTTP client per gateway replica; worker i uses replica i mod n."""

    def __init__(self, base_urls: list[str], requester_token: str, approver_token: str, concurrency: int) -> None:
        limits = httpx.Limits(max_connections=max(2, concurrency * 2))

        def client(url: str, token: str) -> httpx.AsyncClient:
            return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60,
                                     limits=limits)

        self.pairs = [(client(url, requester_token), client(url, approver_token)) for url in base_urls]

    def for_worker(self, index: int) -> tuple[httpx.AsyncClient, httpx.AsyncClient]:
        return self.pairs[index % len(self.pairs)]

    async def aclose(self) -> None:
        for pair in self.pairs:
            for c in pair:
                await c.aclose()


class Samples:
    def __init__(self) -> None:
        self.stages: dict[str, list[float]] = defaultdict(list)
        self.failures: list[str] = []
        self.done = 0


async def new_sessions(clients: Clients, count: int) -> list[str]:
    out = []
    for i in range(count):
        response = await clients.for_worker(i)[0].post("/v1/sessions", json={})
        response.raise_for_status()
        out.append(response.json()["session_id"])
    return out


async def one_cycle(client: httpx.AsyncClient, approver: httpx.AsyncClient, watch: EventWatch, session: str,
                    sku: str, samples: Samples) -> None:
    calls = f"/v1/sessions/{session}/tool-calls"
    t0 = time.perf_counter()
    drafted = await client.post(calls, json={"tool": "create_order_draft",
                                             "arguments": {"customer_id": CUSTOMER, "lines": [{"sku": sku, "qty": 1}]}})
    if drafted.status_code != 200:
        raise RuntimeError(f"draft {drafted.status_code}: {drafted.text[:200]}")
    draft = drafted.json()["result"]
    call_id = f"bench-{uuid.uuid4().hex}"
    t1 = time.perf_counter()
    response = await client.post(calls, json={"tool": "submit_order", "call_id": call_id, "arguments": {
        "draft_id": draft["draft_id"], "revision": draft["revision"]}})
    t2 = time.perf_counter()
    if response.status_code != 202:
        raise RuntimeError(f"request {response.status_code}: {response.text[:200]}")
    pending = response.json()
    visible = await watch.wait(call_id, "approval_pending")
    t3 = time.perf_counter()
    decision = await approver.post(f"/v1/approvals/{pending['pending_id']}/decision",
                                   json={"action": "approve", "fingerprint": pending["fingerprint"]})
    t4 = time.perf_counter()
    if decision.status_code != 200:
        raise RuntimeError(f"decision {decision.status_code}: {decision.text[:200]}")
    finished = await watch.wait(call_id, "tool_finished")
    for name, value in (("request_to_pending", visible - t1), ("decision_to_finished", finished - t3),
                        ("draft", t1 - t0), ("request", t2 - t1), ("decision", t4 - t3), ("cycle", finished - t0)):
        samples.stages[name].append(value)
    samples.done += 1


async def run_workers(count: int, per_worker: int, body) -> Samples:
    """``count`` workers each run ``body(worker, samples)`` ``per_worker`` times; failures are collected."""
    samples = Samples()

    async def worker(index: int) -> None:
        for _ in range(per_worker):
            try:
                await body(index, samples)
            except Exception as exc:  # noqa: BLE001 - a failed cycle is a figure, not a crash
                samples.failures.append(f"{type(exc).__name__}: {exc}")

    await asyncio.gather(*(worker(i) for i in range(count)))
    return samples


def cycle_body(clients: Clients, watch: EventWatch, sessions: list[str], skus: list[str]):
    async def body(index: int, samples: Samples) -> None:
        client, approver = clients.for_worker(index)
        await one_cycle(client, approver, watch, sessions[index], skus[index], samples)

    return body


def read_body(clients: Clients, sessions: list[str], skus: list[str]):
    async def body(index: int, samples: Samples) -> None:
        client, _ = clients.for_worker(index)
        t0 = time.perf_counter()
        response = await client.post(f"/v1/sessions/{sessions[index]}/tool-calls",
                                     json={"tool": "get_product", "arguments": {"sku": skus[index]}})
        t1 = time.perf_counter()
        if response.status_code != 200:
            raise RuntimeError(f"read {response.status_code}: {response.text[:200]}")
        samples.stages["read_tool_call"].append(t1 - t0)
        samples.done += 1

    return body


async def direct_reads(clients: Clients, skus: list[str], count: int) -> list[float]:
    """``count`` sequential ``GET /v1/erp/products/{sku}`` (no tool call, nothing recorded)."""
    client, _ = clients.for_worker(0)
    out = []
    for i in range(count):
        t0 = time.perf_counter()
        response = await client.get(f"/v1/erp/products/{skus[i % len(skus)]}")
        out.append(time.perf_counter() - t0)
        response.raise_for_status()
    return out
