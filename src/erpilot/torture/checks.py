"""The invariants `erpilot torture` checks after each run, from outside the services.

What the run's calls say (event stream in JetStream, tool-call and approval views over HTTP) is held
against what the ledger holds (the ERP's tables, read-only): every approved operation committed
exactly once, nothing committed without approval, no approval left pending, each session's `seq`
gap-free and each call's lifecycle well-formed, stock and payments equal to the committed effects. And the
run itself: its failpoint was reached (a run that crashed nothing proves nothing), only there, and everything
settled in time. The approvals, their grants and the audit chain are ``approval_checks``'s.

Each check has a test that feeds it a broken state (tests/unit/test_torture_checks.py, and
tests/integration/test_torture_audit_check.py for a tampered audit chain).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from erpilot.torture.stack import TortureStack
from erpilot.torture.targets import Target
from erpilot.torture.workload import Call, Driver

TERMINAL = ("approved", "rejected", "cancelled", "expired", "superseded")
NOT_EXECUTED = ("rejected", "cancelled", "expired")


@dataclass
class Findings:
    lost: list[str] = field(default_factory=list)  # approved (or started) but never done, or left pending
    doubled: list[str] = field(default_factory=list)  # an effect or a lifecycle step that happened twice
    violations: list[str] = field(default_factory=list)  # any other broken invariant
    unreached: list[str] = field(default_factory=list)  # the run never crashed at its failpoint

    @property
    def ok(self) -> bool:
        return not (self.lost or self.doubled or self.violations or self.unreached)

    def all(self) -> list[str]:
        return ([f"unreached: {m}" for m in self.unreached] + [f"lost: {m}" for m in self.lost]
                + [f"doubled: {m}" for m in self.doubled] + [f"violation: {m}" for m in self.violations])


@dataclass
class Expected:
    """The ledger as the committed effects say it must be (kept across the campaign's runs)."""

    stock: dict[str, int]
    refunded: dict[str, int] = field(default_factory=dict)  # order_id -> refunded minor units
    paid: dict[str, int] = field(default_factory=dict)  # order_id -> paid minor units
    cancelled: set[str] = field(default_factory=set)
    orders: int = 0  # campaign orders committed

    def apply(self, tool: str, arguments: dict, result: dict) -> None:
        if tool == "submit_order":
            self.orders += 1
            self.refunded[result["order_id"]] = 0
            self.paid[result["order_id"]] = result["paid_minor"]
            for line in result["lines"]:
                self.stock[line["sku"]] -= line["qty"]
        elif tool == "cancel_order":
            self.cancelled.add(result["order_id"])
            for line in result["lines"]:
                self.stock[line["sku"]] += line["qty"]
        elif tool == "adjust_stock":
            self.stock[arguments["sku"]] += arguments["delta"]
        elif tool == "refund_payment":
            self.refunded[arguments["order_id"]] += arguments["amount_minor"]

    def refundable(self) -> dict[str, int]:
        """Orders still placed with money left to refund: what the next runs may cancel or refund."""
        return {order_id: paid - self.refunded.get(order_id, 0) for order_id, paid in self.paid.items()
                if order_id not in self.cancelled and paid > self.refunded.get(order_id, 0)}


def lifecycle_problems(call_id: str, types: list[tuple[str, dict]]) -> tuple[list[str], list[str]]:
    """(doubled, malformed) for one call's events: tool_started, [pending, resolved]*, [executing], finished."""
    doubled, malformed = [], []
    names = [t for t, _ in types]
    for name in ("tool_started", "tool_executing", "tool_finished"):
        if names.count(name) > 1:
            doubled.append(f"{call_id}: {names.count(name)} × {name}")
    if not names or names[0] != "tool_started":
        malformed.append(f"{call_id}: does not begin with tool_started: {names}")
    if names and names[-1] != "tool_finished":
        malformed.append(f"{call_id}: does not end with tool_finished: {names}")
    waiting = None  # the pending approval awaiting its resolution
    last_status = None
    for name, data in types[1:]:
        if name == "approval_pending":
            if waiting is not None:
                malformed.append(f"{call_id}: a second approval_pending before {waiting} was resolved")
            waiting, last_status = data.get("pending_id"), None
        elif name == "approval_resolved":
            if data.get("pending_id") != waiting:
                malformed.append(f"{call_id}: approval_resolved for {data.get('pending_id')}, awaited {waiting}")
            waiting, last_status = None, data.get("status")
        elif name == "tool_executing" and (waiting is not None or last_status != "approved"):
            malformed.append(f"{call_id}: tool_executing without an approval (last {last_status})")
        elif name == "tool_finished" and last_status in NOT_EXECUTED and data.get("outcome") != "not_executed":
            malformed.append(f"{call_id}: {data.get('outcome')} after an approval that ended {last_status}")
    return doubled, malformed


async def check_session(ts: TortureStack, session_id: str, findings: Findings) -> None:
    events = await ts.session_events(session_id)
    seqs = [e["seq"] for e in events]
    if seqs != list(range(1, len(seqs) + 1)):
        findings.violations.append(f"session {session_id}: seq is not gap-free from 1: {seqs}")
    per_call: dict[str, list[tuple[str, dict]]] = {}
    for event in events:
        call_id = event["data"].get("call_id")
        if call_id:
            per_call.setdefault(call_id, []).append((event["type"], event["data"]))
    for call_id, types in per_call.items():
        doubled, malformed = lifecycle_problems(call_id, types)
        findings.doubled += doubled
        findings.violations += malformed


async def check_call(driver: Driver, call: Call, expected: Expected, findings: Findings,
                     tally: Counter | None = None) -> None:
    """One call against its views; records its effect in `expected` when it committed."""
    findings.violations += [f"{call.call_id}: {p}" for p in call.problems]
    view = await driver.view(call)
    if tally is not None and view is not None:
        tally[(call.tool, view.get("outcome") or view["status"])] += 1
    if view is None:
        findings.lost.append(f"{call.tool} {call.call_id}: the API does not know the call")
        return
    if view["status"] != "finished":
        findings.lost.append(f"{call.tool} {call.call_id}: still {view['status']} after the run")
        return
    if not call.pending_ids:
        if view["outcome"] == "succeeded" and call.tool != "create_order_draft":
            findings.violations.append(f"{call.tool} {call.call_id}: succeeded without any approval")
        return
    statuses = []
    for pending_id in call.pending_ids:
        response = await driver.send("decider", "GET", f"/v1/approvals/{pending_id}")
        statuses.append(response.json()["status"] if response is not None and response.status_code == 200 else None)
    if any(s not in TERMINAL for s in statuses):
        findings.lost.append(f"{call.tool} {call.call_id}: approval left {statuses} (forgotten)")
    final = statuses[-1]
    operation = await driver.send("requester", "GET", f"/v1/operations/{view['operation_id']}")
    op = operation.json() if operation is not None and operation.status_code == 200 else {}
    if final == "approved":
        if op.get("status") == "committed" and view["outcome"] == "succeeded":
            expected.apply(call.tool, view["arguments"], view["result"])
        elif not (op.get("status") == "rejected" and view["outcome"] == "business_rejected"):
            findings.lost.append(f"{call.tool} {call.call_id}: approved, yet operation {op.get('status')} and "
                                 f"outcome {view['outcome']}")
    else:
        if call.approved_by_api:
            findings.lost.append(f"{call.tool} {call.call_id}: the API answered approved, the record says {final}")
        if op.get("status") == "committed":
            findings.violations.append(f"{call.tool} {call.call_id}: committed although the approval ended {final}")
        if view["outcome"] != "not_executed":
            findings.violations.append(f"{call.tool} {call.call_id}: outcome {view['outcome']} after {final}")


async def check_ledger(ts: TortureStack, expected: Expected, sessions: list[str], findings: Findings) -> None:
    """Stock, orders and refunds in the ERP's tables against the committed effects."""
    for sku, on_hand in await ts.scalars("select sku, on_hand from erp.products"):
        want = expected.stock.get(sku, on_hand)
        if on_hand != want:
            bucket = findings.doubled if on_hand < want else findings.lost
            bucket.append(f"stock {sku}: {on_hand} on hand, committed effects say {want}")
    rows = await ts.scalars("select order_id, draft_id, revision, refunded_minor, status from erp.orders "
                            "where session_id = any(:sessions)", sessions=sessions)
    per_revision = Counter((r.draft_id, r.revision) for r in rows)
    findings.doubled += [f"draft {d} revision {r}: {n} orders" for (d, r), n in per_revision.items() if n > 1]
    if len(rows) != expected.orders:
        bucket = findings.doubled if len(rows) > expected.orders else findings.lost
        bucket.append(f"{len(rows)} campaign orders in the ledger, {expected.orders} committed")
    for row in rows:
        want = expected.refunded.get(row.order_id, 0)
        if row.refunded_minor != want:
            bucket = findings.doubled if row.refunded_minor > want else findings.lost
            bucket.append(f"order {row.order_id}: refunded {row.refunded_minor}, committed refunds say {want}")
        if (row.status == "cancelled") != (row.order_id in expected.cancelled):
            findings.violations.append(f"order {row.order_id}: status {row.status} disagrees with the commits")
    [(refunds,)] = await ts.scalars("select count(*) from erp.refunds r join erp.orders o using (order_id) "
                                    "where o.session_id = any(:sessions)", sessions=sessions)
    [(committed_refunds,)] = await ts.scalars(
        "select count(*) from erp.operations where tool = 'refund_payment' and status = 'committed' "
        "and session_id = any(:sessions)", sessions=sessions)
    if refunds != committed_refunds:
        findings.doubled.append(f"{refunds} refund rows for {committed_refunds} committed refund operations")


def check_messages(messages: dict[str, list], findings: Findings) -> None:
    """No event stored twice (the outbox's re-publish must be de-duplicated), nothing dead-lettered. (Session
    events are no stream's: the agent's database stores each once, under its unique seq.)"""
    stream = "ERPILOT_EVENTS"
    seen = Counter((subject, data) for subject, data, _ in messages.get(stream, []))
    findings.doubled += [f"{stream}: a message on {subject} stored {n} times" for (subject, _), n in seen.items()
                         if n > 1]
    for subject, _data, headers in messages.get("ERPILOT_DEAD_LETTERS", []):
        findings.violations.append(f"dead-lettered from {headers.get('Erpilot-Original-Subject', subject)}: "
                                   f"{headers.get('Erpilot-Reason', '')[:200]}")


def run_findings(target: Target, crashes: list[int], other_exits: list[str], backlog: dict[str, int],
                 quiet_timeout: float) -> Findings:
    """The run itself: it crashed at its failpoint (exit 137), nothing else died, and everything settled."""
    findings = Findings()
    if not crashes:
        findings.unreached.append(f"{target.failpoint} was never reached in {target.service}: the run crashed "
                                  "nothing, so it proves nothing (does the workload pass that point?)")
    findings.violations += [f"crash at {target.failpoint} exited {c}, not 137" for c in crashes if c != 137]
    findings.violations += [f"another process exited: {e}" for e in other_exits]
    if backlog:
        findings.violations.append(f"not quiet after {quiet_timeout:.0f}s: {backlog}")
    return findings
