"""Benchmark of the ERP commit path: prepared writes committed under signed grants, 1 and 2 replicas.

For each replica count it starts that many ERP processes (``python -m erpilot serve erp``), prepares
``--operations`` writes on products of their own (``adjust_stock``, or ``submit_order`` of a one-line
draft), signs a grant for each, then commits them ``--concurrency`` at a time over NATS JetStream and
reports commits/s and the p50/p99 latency of one commit (request sent -> answer received). Afterwards it
checks that every commit succeeded and moved stock exactly once.

By default it starts its own embedded NATS and PostgreSQL in a temporary directory; pass
``--nats-url`` and ``--database-url`` to use running servers (the schema is migrated if needed).

    uv run python benchmarks/erp_commit.py --operations 500 --concurrency 32 --replicas 1,2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsBroker
from sqlalchemy import func, select

from erpilot.stack.nats_credentials import migrate_jetstream_on
from erpilot.stack.stack import migrate_all
from erpilot.stack.supervisor import Supervisor
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.erp.v1 import CommitOperationV1, ExecuteToolV1, PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_erp.adapters.tables import customers, products
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.broker import ServiceUnavailable, request
from erpilot_platform.db import create_engine
from erpilot_platform.grants import encode_public_key, encode_signing_key, sign_grant
from erpilot_platform.runtime import PingV1
from erpilot_platform.testing.backends import start_backend

START_STOCK = 1_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--operations", "-n", type=int, default=400, help="commits per run (default 400)")
    parser.add_argument("--concurrency", "-c", type=int, default=32, help="commits in flight (default 32)")
    parser.add_argument("--replicas", default="1,2", help="comma-separated replica counts to run (default 1,2)")
    parser.add_argument("--tool", choices=("adjust_stock", "submit_order"), default="adjust_stock")
    parser.add_argument("--nats-url", help="use this NATS server instead of an embedded one")
    parser.add_argument("--database-url", help="use this PostgreSQL database instead of an embedded one")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    return parser.parse_args(argv)


class Bench:
    def __init__(self, broker: NatsBroker, engine: Any, key: Ed25519PrivateKey, concurrency: int,
                 assertion_key: Ed25519PrivateKey):
        self.broker = broker
        self.engine = engine
        self.key = key
        self.assertion_key = assertion_key  # the gateway's: the ERP prepares and drafts only for a vouched requester
        self.limit = asyncio.Semaphore(concurrency)

    async def ask(self, subject: str, payload: Message) -> ReplyV1:
        async with self.limit:
            reply = await request(self.broker, subject, payload, durable=".cmd." in subject, timeout=60)
        if not reply.ok:
            raise RuntimeError(f"{subject}: {reply.error}")
        return reply

    async def setup_rows(self, n: int) -> tuple[str, list[str]]:
        run = uuid.uuid4().hex[:8]
        skus = [f"SKU-BENCH-{run}-{i:05d}" for i in range(n)]
        customer_id = f"C-BENCH-{run}"
        async with self.engine.begin() as conn:
            await conn.execute(customers.insert().values(customer_id=customer_id, name="Bench GmbH", discount_pct=0))
            await conn.execute(products.insert(), [
                {"sku": sku, "name": f"Bench item {sku}", "status": "active", "price_minor": 100, "currency": "EUR",
                 "on_hand": START_STOCK} for sku in skus])
        return customer_id, skus

    async def prepare_one(self, tool: str, sku: str, customer_id: str, session_id: str) -> PrepareOperationV1:
        if tool == "submit_order":
            draft = await self.ask(subjects.ERP_REQ_DRAFT, ExecuteToolV1(
                session_id=session_id, call_id=uuid.uuid4().hex, operation_id=uuid.uuid4().hex,
                tool="create_order_draft", requested_by="bench", assertion=self.assertion(session_id),
                arguments={"customer_id": customer_id, "lines": [{"sku": sku, "qty": 1}]}))
            arguments = {"draft_id": draft.data["result"]["draft_id"], "revision": 1}
        else:
            arguments = {"sku": sku, "delta": -1, "reason": "benchmark"}
        args = normalise(tool, arguments)
        call_id = uuid.uuid4().hex
        cmd = PrepareOperationV1(operation_id=uuid.uuid4().hex, session_id=session_id, call_id=call_id,
                                 tool=tool, arguments=args, fingerprint=fingerprint(tool, 1, args),
                                 requested_by="bench", assertion=self.assertion(session_id, call_id, tool))
        await self.ask(subjects.ERP_CMD_PREPARE, cmd)
        return cmd

    def assertion(self, session_id: str, call_id: str, tool: str) -> str:
        return sign_assertion(self.assertion_key, sub="bench", roles=["requester"], session_id=session_id,
                              call_id=call_id, tool=tool)

    def grant(self, cmd: PrepareOperationV1) -> CommitOperationV1:
        grant = sign_grant(GrantV1(pending_id=uuid.uuid4().hex, operation_id=cmd.operation_id,
                                   fingerprint=cmd.fingerprint, decided_by="bench", decided_at=datetime.now(UTC)),
                           self.key)
        return CommitOperationV1(operation_id=cmd.operation_id, grant=grant)

    async def commit_one(self, cmd: CommitOperationV1) -> float:
        async with self.limit:
            started = time.perf_counter()
            reply = await request(self.broker, subjects.ERP_CMD_COMMIT, cmd, durable=True, timeout=60)
            elapsed = time.perf_counter() - started
        if not reply.ok or reply.data["status"] != "committed":
            raise RuntimeError(f"commit of {cmd.operation_id} failed: {reply}")
        return elapsed

    async def run(self, tool: str, n: int) -> dict[str, Any]:
        customer_id, skus = await self.setup_rows(n)
        session_id = f"S-BENCH-{uuid.uuid4().hex[:8]}"
        prepared = await asyncio.gather(*(self.prepare_one(tool, sku, customer_id, session_id) for sku in skus))
        commits = [self.grant(cmd) for cmd in prepared]
        started = time.perf_counter()
        latencies = await asyncio.gather(*(self.commit_one(cmd) for cmd in commits))
        wall = time.perf_counter() - started
        async with self.engine.connect() as conn:
            moved = await conn.scalar(select(func.sum(START_STOCK - products.c.on_hand))
                                      .where(products.c.sku.in_(skus)))
        if moved != n:
            raise RuntimeError(f"expected {n} units moved, found {moved}")
        ordered = sorted(latencies)
        return {"commits": n, "seconds": round(wall, 3), "commits_per_s": round(n / wall, 1),
                "p50_ms": round(statistics.median(ordered) * 1000, 1),
                "p99_ms": round(ordered[min(n - 1, int(0.99 * n))] * 1000, 1)}


async def wait_ready(broker: NatsBroker, supervisor: Supervisor, names: list[str], timeout: float = 90.0) -> None:
    """Every replica logged its start and the service answers a ping."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if exits := supervisor.check():
            raise RuntimeError("an ERP replica died:\n" + "\n".join(map(str, exits)))
        started = all("service erp started" in supervisor.children[n].log_path.read_text(errors="replace")
                      for n in names if supervisor.children[n].log_path.exists())
        try:
            if started and (await request(broker, subjects.ping_subject("erp"), PingV1(), durable=False,
                                          timeout=1)).ok:
                return
        except ServiceUnavailable:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError("the ERP replicas did not become ready")


async def main_async(opts: argparse.Namespace, nats_url: str, database_url: str, work_dir: Path) -> list[dict]:
    key, assertion_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    env = {"ERPILOT_NATS_URL": nats_url, "ERPILOT_DATABASE_URL": database_url, "ERPILOT_DATA_DIR": str(work_dir),
           "ERPILOT_GRANT_VERIFY_KEY": encode_public_key(key.public_key()),
           "ERPILOT_ASSERTION_VERIFY_KEY": encode_public_key(assertion_key.public_key()),
           # The ERP signs the approval requests it outboxes (nothing consumes them here): any ledger key will do.
           "ERPILOT_LEDGER_SIGNING_KEY": encode_signing_key(Ed25519PrivateKey.generate()), "ERPILOT_LOG_LEVEL": "INFO"}
    broker = NatsBroker(nats_url, max_reconnect_attempts=-1, log_level=40)
    await broker.connect()
    await migrate_jetstream_on(broker.config.connection_state.stream)
    engine = create_engine(database_url, pool_size=2, application_name="erp-bench")
    results = []
    try:
        for replicas in [int(r) for r in opts.replicas.split(",")]:
            supervisor = Supervisor(work_dir / f"logs-{replicas}")
            names = [f"erp-{i + 1}" for i in range(replicas)]
            try:
                for name in names:
                    supervisor.start(name, [sys.executable, "-m", "erpilot", "serve", "erp"], env=env)
                await wait_ready(broker, supervisor, names)
                bench = Bench(broker, engine, key, opts.concurrency, assertion_key)
                result = await bench.run(opts.tool, opts.operations)
            finally:
                supervisor.stop_all()
            results.append({"replicas": replicas, "tool": opts.tool, "concurrency": opts.concurrency, **result})
            if not opts.json:
                print_row(results[-1])
    finally:
        await engine.dispose()
        await broker.stop()
    return results


def print_row(r: dict[str, Any]) -> None:
    print(f"replicas={r['replicas']} tool={r['tool']} n={r['commits']} concurrency={r['concurrency']}: "
          f"{r['commits_per_s']} commits/s, p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms ({r['seconds']} s)", flush=True)


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="erpilot-bench-") as tmp:
        work_dir = Path(tmp)
        backend = None
        if not (opts.nats_url and opts.database_url):
            print("starting embedded NATS and PostgreSQL ...", file=sys.stderr, flush=True)
            backend = start_backend(work_dir / "backend")
        try:
            nats_url = opts.nats_url or backend.nats_url
            database_url = opts.database_url or backend.database_url
            migrate_all(database_url)
            results = asyncio.run(main_async(opts, nats_url, database_url, work_dir))
        finally:
            if backend is not None:
                backend.stop()
    if opts.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
