"""The invariants `erpilot torture` checks of the approvals after each run, from outside the services.

What the approval service's tables and audit log hold (read-only) is held against the ledger's: one decision per
approval, one grant per approved version, grants consumed by the ledger exactly for the approved operations it
finished, nothing committed unapproved; and the audit chain verifies (`erpilot audit verify`). The calls, the
session events and the ledger's own effects are ``checks``'s.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from erpilot.torture.checks import Findings
from erpilot.torture.stack import TortureStack

# Audit kinds that end a version (service_layer/audit.py: RESOLUTION_KINDS), each with the status it ended in.
RESOLUTIONS = ("decision", "expiry", "edit", "withdrawal")
FINISHED = ("committed", "rejected")  # a commit consumes its grant, also when the business rules refuse it


@dataclass
class ApprovalRecords:
    """What the approval service and the ledger hold about some sessions' approvals (read-only)."""

    approvals: dict[str, tuple[str, str]]  # pending_id -> (operation_id, status)
    resolutions: list[tuple[str, str, str | None]]  # audit rows ending a version: (pending_id, kind, status)
    grants_issued: Counter  # pending_id -> audit rows `grant_issued`
    operations: dict[str, str]  # operation_id -> the ledger's status (prepared | committed | rejected)
    consumed: list[tuple[str, str]]  # (pending_id, operation_id) of every grant the ledger consumed
    consumed_audited: Counter  # operation_id -> audit rows `grant_consumed`


def approval_problems(records: ApprovalRecords, findings: Findings) -> None:
    """One decision per approval; one grant per approved version; the ledger consumed exactly the grants of the
    approved operations it finished (one each, naming the approved version); nothing committed unapproved."""
    ended: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for pending_id, kind, status in records.resolutions:
        ended[pending_id].append((kind, status))
    for pending_id, (_operation, status) in sorted(records.approvals.items()):
        decisions = ended.get(pending_id, [])
        if status == "pending":
            if decisions:
                findings.violations.append(f"approval {pending_id}: still pending, yet decided: {decisions}")
        elif len(decisions) > 1:
            findings.doubled.append(f"approval {pending_id}: {len(decisions)} decisions recorded: {decisions}")
        elif not decisions:
            findings.violations.append(f"approval {pending_id}: ended {status} without a recorded decision")
        elif decisions[0][1] != status:
            findings.violations.append(f"approval {pending_id}: ended {status}, its decision says {decisions[0][1]}")
        issued, wanted = records.grants_issued.get(pending_id, 0), int(status == "approved")
        if issued != wanted:
            bucket = findings.doubled if issued > wanted else findings.violations
            bucket.append(f"approval {pending_id} ({status}): {issued} grants issued, {wanted} expected")
    for operation_id, n in Counter(op for _, op in records.consumed).items():
        if n > 1:
            findings.doubled.append(f"operation {operation_id}: {n} grants consumed")
    for pending_id, operation_id in records.consumed:
        operation, status = records.approvals.get(pending_id, (None, None))
        if status != "approved" or operation != operation_id:
            findings.violations.append(f"grant {pending_id} consumed for {operation_id}, but that approval is "
                                       f"{status or 'unknown'} (for {operation})")
    approved_finished = {op for op, status in records.approvals.values()
                         if status == "approved" and records.operations.get(op) in FINISHED}
    consumed = {op for _, op in records.consumed}
    if consumed != approved_finished:
        findings.violations.append(
            f"{len(consumed)} grants consumed, {len(approved_finished)} approved operations finished by the ledger: "
            f"unconsumed {sorted(approved_finished - consumed)}, unexplained {sorted(consumed - approved_finished)}")
    approval_of = {op: status for op, status in records.approvals.values()}
    for operation_id, status in sorted(records.operations.items()):
        if status == "committed" and approval_of.get(operation_id) != "approved":
            findings.violations.append(f"operation {operation_id}: committed, its approval is "
                                       f"{approval_of.get(operation_id, 'missing')}")
        audited, wanted = records.consumed_audited.get(operation_id, 0), int(status == "committed")
        if audited != wanted:
            bucket = findings.doubled if audited > wanted else findings.lost
            bucket.append(f"operation {operation_id} ({status}): {audited} grant_consumed rows in the audit log")


async def read_approval_records(ts: TortureStack, sessions: list[str]) -> ApprovalRecords:
    approvals = {r.pending_id: (r.operation_id, r.status) for r in await ts.scalars(
        "select pending_id, operation_id, status from approval.approvals where session_id = any(:s)", s=sessions)}
    audit = await ts.scalars(
        "select l.pending_id, l.operation_id, l.kind, l.data->>'status' as status from approval.audit_log l "
        "where l.pending_id = any(:p) or l.operation_id = any(:o)",
        p=list(approvals), o=[op for op, _ in approvals.values()])
    operations = dict(await ts.scalars("select operation_id, status from erp.operations where session_id = any(:s)",
                                       s=sessions))
    consumed = [(r.pending_id, r.operation_id) for r in await ts.scalars(
        "select pending_id, operation_id from erp.consumed_grants where operation_id = any(:o)", o=list(operations))]
    return ApprovalRecords(
        approvals=approvals,
        resolutions=[(r.pending_id, r.kind, r.status) for r in audit if r.kind in RESOLUTIONS],
        grants_issued=Counter(r.pending_id for r in audit if r.kind == "grant_issued"),
        operations=operations, consumed=consumed,
        consumed_audited=Counter(r.operation_id for r in audit if r.kind == "grant_consumed"))


async def check_approvals(ts: TortureStack, sessions: list[str], findings: Findings) -> None:
    approval_problems(await read_approval_records(ts, sessions), findings)


def check_audit(verdict: tuple[bool, str], findings: Findings) -> None:
    """The verdict of `erpilot audit verify` (``ops.audit.verify``): the whole chain, every row and signature."""
    intact, text = verdict
    if not intact:
        findings.violations.append(f"erpilot audit verify: {text}")
