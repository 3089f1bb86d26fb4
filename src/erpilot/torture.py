"""`erpilot torture`: a seeded crash campaign at every failpoint, checked from outside.

Run after run, one failpoint of docs/FAILPOINTS.md is armed in the service that owns it, a seeded mix of
tool calls, approvals, rejections, edits and expiries goes through the HTTP API, the service dies at the
failpoint (exit 137) and is SIGKILLed and restarted disarmed; once nothing is in flight (outboxes empty,
every JetStream message acknowledged, after real redeliveries), the invariants of `torture_checks` are
checked. Run k of a failpoint uses seed S+k: `--failpoint F --seed S+k --runs 1` replays it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from erpilot.torture_checks import Expected, Findings, check_call, check_ledger, check_messages, check_session
from erpilot.torture_stack import TortureStack, from_environment
from erpilot.torture_workload import SKUS, Driver, Ledger, Workload, make_tokens

OUTBOX_OWNERS = ("erp", "approval", "agent")
# Every failpoint in docs/FAILPOINTS.md and the service that reaches it (None: one of OUTBOX_OWNERS).
FAILPOINTS: dict[str, str | None] = {
    "erp.draft.after_db_commit": "erp",
    "erp.prepare.after_db_commit": "erp",
    "erp.commit.before_db_commit": "erp",
    "erp.commit.after_db_commit": "erp",
    "approval.decide.before_db_commit": "approval",
    "approval.decide.after_db_commit": "approval",
    "agent.call.after_record": "agent",
    "agent.commit.after_send": "agent",
    "outbox.after_publish": None,
    "outbox.before_commit": None,
}
LOW_STOCK = 60


@dataclass
class Row:
    runs: int = 0
    crashed: int = 0
    lost: int = 0
    doubled: int = 0
    violations: int = 0
    failed: int = 0
    seconds: float = 0.0


@dataclass
class Campaign:
    ts: TortureStack
    quiet_timeout: float = 90.0
    rows: dict[str, Row] = field(default_factory=dict)
    first_failure: tuple[str, int, list[str]] | None = None
    expected: Expected | None = None
    ledger: Ledger = field(default_factory=Ledger)
    sessions: list[str] = field(default_factory=list)
    tally: Counter = field(default_factory=Counter)  # (tool, outcome) of every call the campaign made

    async def rebaseline(self) -> None:
        """Take the ledger as it is as the expectation (at the start, and after a failing run)."""
        stock = {sku: on_hand for sku, on_hand in await self.ts.scalars("select sku, on_hand from erp.products")}
        self.expected = Expected(stock=stock)
        rows = await self.ts.scalars("select order_id, paid_minor, refunded_minor, status from erp.orders "
                                     "where session_id = any(:s)", s=self.sessions)
        self.expected.orders = len(rows)
        self.expected.refunded = {r.order_id: r.refunded_minor for r in rows}
        self.expected.paid = {r.order_id: r.paid_minor for r in rows}
        self.expected.cancelled = {r.order_id for r in rows if r.status == "cancelled"}

    async def one_run(self, failpoint: str, seed: int) -> tuple[Row, list[str]]:
        rng = random.Random(f"{failpoint}:{seed}")
        target = FAILPOINTS[failpoint] or rng.choice(OUTBOX_OWNERS)
        started = time.monotonic()
        seqs = await self.ts.last_seqs()
        self.ts.arm(target, f"{failpoint}=crash")
        async with httpx.AsyncClient(base_url=self.ts.base_url, timeout=60) as client:
            driver = Driver(self.ts, target, client, make_tokens(self.ts.secret, f"{seed}-{rng.random():.6f}"))
            notes: list[str] = []
            calls = await Workload(driver, rng, self.ledger, expiry_ttl=self.ts.expiry_ttl).run()
            await driver.wait_finished(calls, timeout=self.quiet_timeout)
            self.ts.disarm(target)
            await driver.recover()
            backlog = await self.ts.wait_quiet(self.quiet_timeout)
            await driver.wait_finished(calls, timeout=self.quiet_timeout)
            await driver.recover()
            if not driver.crashes:
                notes.append(f"{failpoint} was not reached in {target}")
            findings = Findings()
            if backlog:
                findings.violations.append(f"not quiet after {self.quiet_timeout:.0f}s: {backlog}")
            findings.violations += [f"crash at {failpoint} exited {c}, not 137" for c in driver.crashes if c != 137]
            findings.violations += [f"another process exited: {e}" for e in driver.other_exits]
            sessions = sorted({c.session_id for c in calls})
            self.sessions += sessions
            check_messages(await self.ts.messages_since(seqs), findings)
            for session_id in sessions:
                await check_session(self.ts, session_id, findings)
            for call in calls:
                await check_call(driver, call, self.expected, findings, self.tally)
            await check_ledger(self.ts, self.expected, self.sessions, findings)
        if not findings.ok:
            await self.rebaseline()
        self.ledger.low_stock = [sku for sku, n in self.expected.stock.items() if n < LOW_STOCK
                                 and sku in SKUS]
        self.ledger.open_orders = self.expected.refundable()
        row = Row(runs=1, crashed=int(bool(driver.crashes)), lost=len(findings.lost), doubled=len(findings.doubled),
                  violations=len(findings.violations), failed=int(not findings.ok),
                  seconds=time.monotonic() - started)
        return row, findings.all() + notes

    async def run(self, failpoints: list[str], runs: int, seed: int, progress: Progress) -> None:
        await self.rebaseline()
        for failpoint in failpoints:
            self.rows[failpoint] = Row()
        for k in range(runs):  # round after round over every failpoint: an interrupted campaign stays even
            for failpoint in failpoints:
                row = self.rows[failpoint]
                progress.show(failpoint, seed + k)
                result, messages = await self.one_run(failpoint, seed + k)
                for name in ("runs", "crashed", "lost", "doubled", "violations", "failed", "seconds"):
                    setattr(row, name, getattr(row, name) + getattr(result, name))
                if result.failed and self.first_failure is None:
                    self.first_failure = (failpoint, seed + k, messages)
                progress.advance(failed=bool(result.failed), crashed=bool(result.crashed))
        await self.ts.db().dispose()


class Progress:
    """A one-line progress bar on a terminal, one line per run otherwise."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.failed, self.stream = total, 0, 0, stream
        self.tty = stream.isatty()
        self.label = ""

    def show(self, failpoint: str, seed: int) -> None:
        self.label = f"{failpoint} seed {seed}"
        self._draw()

    def advance(self, *, failed: bool, crashed: bool) -> None:
        self.done += 1
        self.failed += failed
        if not self.tty:
            print(f"[{self.done}/{self.total}] {self.label}: {'FAILED' if failed else 'ok'}"
                  f"{'' if crashed else ' (failpoint not reached)'}", file=self.stream, flush=True)
        self._draw()

    def _draw(self) -> None:
        if self.tty:
            filled = int(30 * self.done / max(1, self.total))
            bar = "#" * filled + "." * (30 - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} failed {self.failed}  {self.label:<50}")
            if self.done == self.total:
                self.stream.write("\n")
            self.stream.flush()


def summary(campaign: Campaign, runs: int) -> str:
    head = f"{'failpoint':<36} {'runs':>5} {'crashed':>7} {'lost':>5} {'doubled':>7} {'invariant':>9} {'s/run':>6}"
    lines = [head, "-" * len(head)]
    for name, row in campaign.rows.items():
        lines.append(f"{name:<36} {row.runs:>5} {row.crashed:>7} {row.lost:>5} {row.doubled:>7} "
                     f"{row.violations:>9} {row.seconds / max(1, row.runs):>6.1f}")
    if campaign.tally:
        tools = sorted({tool for tool, _ in campaign.tally})
        lines += ["", "calls made: " + "; ".join(
            f"{tool} " + ", ".join(f"{outcome} {n}" for (t, outcome), n in sorted(campaign.tally.items()) if t == tool)
            for tool in tools)]
    if campaign.first_failure:
        failpoint, seed, messages = campaign.first_failure
        lines += ["", f"first failing run: {failpoint} seed {seed}",
                  f"replay: erpilot torture --failpoint {failpoint} --seed {seed} --runs 1",
                  *(f"  {m}" for m in messages[:20])]
    elif sum(row.runs for row in campaign.rows.values()):
        lines += ["", f"every run passed ({runs} per failpoint requested)"]
    return "\n".join(lines)


def cmd_torture(args: argparse.Namespace) -> None:
    unknown = set(args.failpoint or ()) - set(FAILPOINTS)
    if unknown:
        sys.exit(f"erpilot torture: unknown failpoint(s) {sorted(unknown)}; known: {sorted(FAILPOINTS)}")
    failpoints = list(args.failpoint or FAILPOINTS)
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="erpilot-torture-"))
    ts = from_environment(data_dir, ack_wait=args.ack_wait)
    campaign = Campaign(ts)
    interrupted = False
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops like Ctrl-C: with the table so far
    try:
        print(f"starting the campaign's stack in {data_dir} ...", file=sys.stderr, flush=True)
        ts.start()
        asyncio.run(campaign.run(failpoints, args.runs, args.seed, Progress(args.runs * len(failpoints))))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        ts.stop()
    if interrupted:
        print("interrupted: the table shows the runs that completed", file=sys.stderr)
    print(summary(campaign, args.runs))
    if interrupted:
        sys.exit(130)
    sys.exit(1 if campaign.first_failure else 0)


def add_parser(sub: argparse._SubParsersAction) -> None:
    torture = sub.add_parser("torture", help="seeded crash campaign at every failpoint, checked after each run")
    torture.add_argument("--runs", type=int, default=10, help="runs per failpoint (default 10)")
    torture.add_argument("--seed", type=int, default=1, help="seed of the first run; run k uses seed+k")
    torture.add_argument("--failpoint", action="append", help="only this failpoint (repeatable)")
    torture.add_argument("--ack-wait", type=float, default=2.0,
                         help="JetStream ack wait of the campaign's services, in seconds (default 2)")
    torture.add_argument("--data-dir", help="where the campaign's NATS, PostgreSQL and logs live (default: a temp dir)")
    torture.set_defaults(func=cmd_torture)
