"""`erpilot torture`: a seeded crash campaign at every failpoint, checked from outside.

Run after run, one failpoint of docs/FAILPOINTS.md is armed in one service that reaches it (every such
pair in every round, ``targets``), a seeded mix of tool calls, approvals, rejections, edits and
expiries goes through the HTTP API, the service dies at the failpoint (exit 137) and is SIGKILLed and
restarted disarmed; once nothing is in flight (outboxes empty, every JetStream message acknowledged, after
real redeliveries), the invariants of ``checks`` are checked: the calls, the session events, the
ledger, the approvals and their grants, and the audit chain (`erpilot audit verify`). A run whose failpoint
was not reached fails: it crashed nothing and proves nothing. Run k of a campaign uses seed S+k, and a run's
workload comes from its target and seed alone: `--failpoint F --seed S+k --runs 1` replays it.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from erpilot.torture.approval_checks import check_approvals, check_audit
from erpilot.torture.checks import (
    Expected,
    check_call,
    check_ledger,
    check_messages,
    check_session,
    run_findings,
)
from erpilot.torture.plan import plan
from erpilot.torture.stack import TortureStack, from_environment
from erpilot.torture.targets import Target, select, targets
from erpilot.torture.workload import Driver, Workload, make_tokens

COUNTED = ("runs", "crashed", "lost", "doubled", "violations", "failed", "seconds")


@dataclass
class Row:
    runs: int = 0
    crashed: int = 0
    lost: int = 0
    doubled: int = 0
    violations: int = 0
    failed: int = 0
    seconds: float = 0.0

    def add(self, other: Row) -> None:
        for name in COUNTED:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def run_seed(campaign_seed: int, index: int) -> int:
    """The seed of run `index` (from 0) of a campaign started with `campaign_seed`: what `--seed` replays."""
    return campaign_seed + index


@dataclass
class Campaign:
    ts: TortureStack
    quiet_timeout: float = 90.0
    rows: dict[str, Row] = field(default_factory=dict)
    first_failure: tuple[str, int, list[str]] | None = None
    expected: Expected | None = None
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

    async def one_run(self, target: Target, seed: int) -> tuple[Row, list[str]]:
        workload_plan = plan(target.label, seed)
        started = time.monotonic()
        seqs = await self.ts.last_seqs()
        async with httpx.AsyncClient(base_url=self.ts.base_url, timeout=60) as client:
            driver = Driver(self.ts, target.service, client, make_tokens(self.ts.secret, workload_plan.people))
            workload = Workload(driver, workload_plan, expiry_ttl=self.ts.expiry_ttl)
            calls = await workload.prepare(dict(await self.ts.scalars("select sku, on_hand from erp.products")))
            self.ts.arm(target.service, f"{target.failpoint}=crash")
            calls += await workload.run()
            await driver.wait_finished(calls, timeout=self.quiet_timeout)
            self.ts.disarm(target.service)
            await driver.recover()
            backlog = await self.ts.wait_quiet(self.quiet_timeout)
            await driver.wait_finished(calls, timeout=self.quiet_timeout)
            await driver.recover()
            findings = run_findings(target, driver.crashes, driver.other_exits, backlog, self.quiet_timeout)
            sessions = sorted({c.session_id for c in calls})
            self.sessions += sessions
            check_messages(await self.ts.messages_since(seqs), findings)
            for session_id in sessions:
                await check_session(self.ts, session_id, findings)
            for call in calls:
                await check_call(driver, call, self.expected, findings, self.tally)
            await check_ledger(self.ts, self.expected, self.sessions, findings)
            await check_approvals(self.ts, sessions, findings)
            check_audit(await self.ts.verify_audit(), findings)
        if not findings.ok:
            await self.rebaseline()
        row = Row(runs=1, crashed=int(bool(driver.crashes)), lost=len(findings.lost), doubled=len(findings.doubled),
                  violations=len(findings.violations), failed=int(not findings.ok),
                  seconds=time.monotonic() - started)
        return row, findings.all() + [f"note: {n}" for n in driver.notes]

    def record(self, target: Target, seed: int, result: Row, messages: list[str]) -> None:
        self.rows.setdefault(target.label, Row()).add(result)
        if result.failed and self.first_failure is None:
            self.first_failure = (target.label, seed, messages)

    async def run(self, chosen: list[Target], runs: int, seed: int, progress: Progress) -> None:
        await self.rebaseline()
        for target in chosen:
            self.rows[target.label] = Row()
        for k in range(runs):  # round after round over every target: an interrupted campaign stays even
            for target in chosen:
                progress.show(target.label, run_seed(seed, k))
                result, messages = await self.one_run(target, run_seed(seed, k))
                self.record(target, run_seed(seed, k), result, messages)
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
    width = max([36, *(len(name) for name in campaign.rows)])
    head = (f"{'failpoint':<{width}} {'runs':>5} {'crashed':>7} {'lost':>5} {'doubled':>7} {'invariant':>9} "
            f"{'s/run':>6}")
    lines = [head, "-" * len(head)]
    for name, row in campaign.rows.items():
        lines.append(f"{name:<{width}} {row.runs:>5} {row.crashed:>7} {row.lost:>5} {row.doubled:>7} "
                     f"{row.violations:>9} {row.seconds / max(1, row.runs):>6.1f}")
    if campaign.tally:
        tools = sorted({tool for tool, _ in campaign.tally})
        lines += ["", "calls made: " + "; ".join(
            f"{tool} " + ", ".join(f"{outcome} {n}" for (t, outcome), n in sorted(campaign.tally.items()) if t == tool)
            for tool in tools)]
    if campaign.first_failure:
        label, seed, messages = campaign.first_failure
        lines += ["", f"first failing run: {label} seed {seed}",
                  f"replay: erpilot torture --failpoint {label} --seed {seed} --runs 1",
                  *(f"  {m}" for m in messages[:20])]
    elif sum(row.runs for row in campaign.rows.values()):
        lines += ["", f"every run passed and crashed at its failpoint ({runs} per failpoint requested)"]
    return "\n".join(lines)


def run_campaign(failpoints: list[str] | None, runs: int, seed: int, *, data_dir: Path | None, ack_wait: float
                 ) -> tuple[Campaign, bool]:
    """Start the campaign's stack, run every chosen target ``runs`` times from ``seed``, stop the stack:
    (the campaign, whether Ctrl-C or SIGTERM cut it short). An unknown failpoint is a ``TableError``."""
    chosen = select(targets(), failpoints)
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="erpilot-torture-"))
    ts = from_environment(data_dir, ack_wait=ack_wait)
    campaign = Campaign(ts)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops like Ctrl-C: with the table so far
    try:
        print(f"starting the campaign's stack in {data_dir} ...", file=sys.stderr, flush=True)
        ts.start()
        asyncio.run(campaign.run(chosen, runs, seed, Progress(runs * len(chosen))))
    except KeyboardInterrupt:
        return campaign, True
    finally:
        ts.stop()
    return campaign, False
