"""Benchmark of the approval service: decisions per second and the latency of the "may decide" list.

It starts its own embedded NATS and PostgreSQL (or uses ``--nats-url`` / ``--database-url``), migrates
the approval schema, bulk-inserts ``--rows`` pending approvals straight into the table (100,000 by
default: the list must stay fast at that size), then runs one approval service process
(``erpilot_approval.app:main``, exactly what ``erpilot serve approval`` runs) and measures over NATS:

- decisions/s at concurrency 1 and 16: ``req.approval.decide`` (core request -> row lock, database
  clock, Ed25519 grant, decision log, outbox -> answer), each on its own pending approval;
- ``query.approval.list`` latency p50/p99 (request sent -> answer received, 100 items per page) for an
  approver (matches most rows), a manager (matches every row), an admin (matches 0.1% of the rows) and
  a session filter; plus the database time alone of the same query.

    uv run python benchmarks/approval_bench.py --rows 100000 --decisions 400 --queries 300
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsBroker
from sqlalchemy import text

from erpilot.stack.nats_credentials import migrate_jetstream_on
from erpilot_approval.adapters import repository
from erpilot_approval.app import MIGRATIONS
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import Actor, DecideV1, ListApprovalsV1
from erpilot_contracts.subjects import ping_subject
from erpilot_platform.broker import ServiceUnavailable, request
from erpilot_platform.db import create_engine
from erpilot_platform.grants import encode_public_key, encode_signing_key
from erpilot_platform.migrations import upgrade
from erpilot_platform.runtime import PingV1
from erpilot_platform.testing.backends import start_backend

FINGERPRINT = "sha256:" + "0" * 64
# 80% approver or manager (submit_order), 19.9% manager only, 0.1% admin only (a selective role).
LOAD_SQL = """
INSERT INTO approval.approvals (pending_id, call_id, session_id, tool, tool_schema_version, arguments, fingerprint,
    operation_id, risk, preview, required_roles, separation_of_duties, requested_by, created_at, expires_at,
    status, policy_version)
SELECT :prefix || i, 'call_' || :prefix || i, 'ses_' || :prefix || (i % 2000), 'submit_order', 1,
    json_build_object('draft_id', 'D-' || i, 'revision', 1), :fingerprint, 'op_' || :prefix || i, 'medium',
    json_build_object('operation', 'Submit order', 'object', 'Draft D-' || i, 'target', 'Customer',
                      'amount_minor', 1000 + i, 'currency', 'EUR'),
    CASE WHEN i % 1000 = 0 THEN ARRAY['admin'] WHEN i % 5 = 0 THEN ARRAY['manager']
         ELSE ARRAY['approver', 'manager'] END::varchar(20)[],
    false, 'requester-' || (i % 50), now() - i * interval '1 millisecond', now() + interval '1 day',
    'pending', 'sha256:bench'
FROM generate_series(1, :rows) AS i
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="pending approvals loaded (default 100000)")
    parser.add_argument("--decisions", type=int, default=400, help="decisions per concurrency level (default 400)")
    parser.add_argument("--queries", type=int, default=300, help="list queries per case (default 300)")
    parser.add_argument("--nats-url", help="use this NATS server instead of an embedded one")
    parser.add_argument("--database-url", help="use this PostgreSQL database instead of an embedded one")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    return parser.parse_args(argv)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def load(engine, prefix: str, rows: int) -> float:
    started = time.perf_counter()
    async with engine.begin() as conn:
        await conn.execute(text(LOAD_SQL), {"prefix": prefix, "rows": rows, "fingerprint": FINGERPRINT})
    async with engine.begin() as conn:
        await conn.execute(text("ANALYZE approval.approvals"))
    return time.perf_counter() - started


async def start_service(env: dict[str, str], broker: NatsBroker) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from erpilot_approval.app import main; main()", env={**os.environ, **env},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    for _ in range(300):
        if proc.returncode is not None:
            raise RuntimeError(f"the approval service exited with {proc.returncode}")
        try:
            if (await request(broker, ping_subject("approval"), PingV1(), durable=False, timeout=1)).ok:
                return proc
        except ServiceUnavailable:
            await asyncio.sleep(0.2)
    raise RuntimeError("the approval service did not start")


async def decisions_per_second(broker: NatsBroker, pending_ids: list[str], concurrency: int) -> dict[str, Any]:
    queue = list(pending_ids)
    latencies: list[float] = []
    failures: list[str] = []

    async def worker(index: int) -> None:
        who = Actor(sub=f"approver-{index}", roles=["approver"])
        while queue:
            cmd = DecideV1(pending_id=queue.pop(), action="approve", fingerprint=FINGERPRINT, actor=who)
            sent = time.perf_counter()
            reply = await request(broker, subjects.APPROVAL_REQ_DECIDE, cmd, durable=False, timeout=30)
            latencies.append(time.perf_counter() - sent)
            if not reply.ok or reply.data["status"] != "approved":
                failures.append(str(reply.error))

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} decisions failed, e.g. {failures[0]}")
    return {"concurrency": concurrency, "decisions": len(pending_ids), "per_second": round(len(pending_ids) / elapsed),
            "p50_ms": round(percentile(latencies, 50) * 1000, 2), "p99_ms": round(percentile(latencies, 99) * 1000, 2)}


async def list_latency(broker: NatsBroker, engine, name: str, query: ListApprovalsV1, n: int) -> dict[str, Any]:
    over_nats: list[float] = []
    for _ in range(n):
        sent = time.perf_counter()
        reply = await request(broker, subjects.APPROVAL_QUERY_LIST, query, durable=False, timeout=10)
        over_nats.append(time.perf_counter() - sent)
        assert reply.ok, reply.error
    items = len(reply.data["items"])
    in_db: list[float] = []
    async with engine.connect() as conn:
        for _ in range(n):
            sent = time.perf_counter()
            await repository.list_decidable(conn, query.actor.roles, status=query.status or "pending",
                                            where=repository.ListFilter(session_id=query.session_id),
                                            limit=query.limit)
            in_db.append(time.perf_counter() - sent)
    return {"case": name, "items": items,
            "p50_ms": round(percentile(over_nats, 50) * 1000, 2), "p99_ms": round(percentile(over_nats, 99) * 1000, 2),
            "db_p50_ms": round(percentile(in_db, 50) * 1000, 2), "db_p99_ms": round(percentile(in_db, 99) * 1000, 2)}


async def run(args: argparse.Namespace, nats_url: str, database_url: str, data_dir: Path) -> dict[str, Any]:
    await asyncio.to_thread(upgrade, MIGRATIONS, database_url, "approval")
    engine = create_engine(database_url, pool_size=2)
    prefix = f"b{uuid.uuid4().hex[:6]}_"
    load_seconds = await load(engine, prefix, args.rows)
    async with engine.connect() as conn:
        pending = (await conn.execute(text("SELECT count(*) FROM approval.approvals WHERE status = 'pending'"))
                   ).scalar_one()
    broker = NatsBroker(nats_url)
    await broker.connect()
    await migrate_jetstream_on(broker.config.connection_state.stream)
    env = {"ERPILOT_NATS_URL": nats_url, "ERPILOT_DATABASE_URL": database_url, "ERPILOT_DATA_DIR": str(data_dir),
           "ERPILOT_GRANT_SIGNING_KEY": encode_signing_key(Ed25519PrivateKey.generate()),
           # Requests are not measured here (the rows are loaded directly): any assertion and ledger key will do.
           "ERPILOT_ASSERTION_VERIFY_KEY": encode_public_key(Ed25519PrivateKey.generate().public_key()),
           "ERPILOT_LEDGER_VERIFY_KEY": encode_public_key(Ed25519PrivateKey.generate().public_key()),
           "ERPILOT_LOG_LEVEL": "WARNING"}
    proc = await start_service(env, broker)
    try:
        approver, manager, admin = (Actor(sub=r, roles=[r]) for r in ("approver", "manager", "admin"))
        cases = [("approver, pending", ListApprovalsV1(actor=approver)),
                 ("manager, pending", ListApprovalsV1(actor=manager)),
                 ("admin, pending (0.1% of rows)", ListApprovalsV1(actor=admin)),
                 ("approver+manager, one session", ListApprovalsV1(actor=Actor(sub="x", roles=["approver", "manager"]),
                                                                   session_id=f"ses_{prefix}7")),
                 ("approver, approved", ListApprovalsV1(actor=approver, status="approved"))]
        lists = [await list_latency(broker, engine, name, query, args.queries) for name, query in cases]
        # Decide rows of the load that approvers may decide (i % 5 != 0), fresh ones for each level.
        candidates = [f"{prefix}{i}" for i in range(1, args.rows + 1) if i % 5 and i % 1000][: 2 * args.decisions]
        decisions = [await decisions_per_second(broker, candidates[:args.decisions], 1),
                     await decisions_per_second(broker, candidates[args.decisions:], 16)]
    finally:
        proc.terminate()
        await proc.wait()
        await broker.stop()
        await engine.dispose()
    return {"rows_loaded": args.rows, "pending_rows": pending, "load_seconds": round(load_seconds, 1),
            "lists": lists, "decisions": decisions}


def report(results: dict[str, Any]) -> None:
    print(f"\n{results['pending_rows']} pending approvals ({results['rows_loaded']} loaded in "
          f"{results['load_seconds']} s)\n")
    print(f"{'list query':34} {'items':>5} {'p50 ms':>8} {'p99 ms':>8} {'db p50':>8} {'db p99':>8}")
    for row in results["lists"]:
        print(f"{row['case']:34} {row['items']:>5} {row['p50_ms']:>8} {row['p99_ms']:>8} "
              f"{row['db_p50_ms']:>8} {row['db_p99_ms']:>8}")
    print(f"\n{'decisions':34} {'count':>5} {'per s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for row in results["decisions"]:
        print(f"{'concurrency ' + str(row['concurrency']):34} {row['decisions']:>5} {row['per_second']:>8} "
              f"{row['p50_ms']:>8} {row['p99_ms']:>8}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="erpilot-approval-bench-") as tmp:
        backend = None
        if not (args.nats_url and args.database_url):
            (Path(tmp) / "backend").mkdir()
            backend = start_backend(Path(tmp) / "backend")
        try:
            results = asyncio.run(run(args, args.nats_url or backend.nats_url,
                                      args.database_url or backend.database_url, Path(tmp) / "data"))
        finally:
            if backend is not None:
                backend.stop()
    print(json.dumps(results, indent=2)) if args.json else report(results)


if __name__ == "__main__":
    main()
