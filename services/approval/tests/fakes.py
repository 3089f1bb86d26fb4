"""The approval service's ports in memory, for the unit tests: its ``Work`` on the platform's ``MemoryUnitOfWork``
(a settable clock; what a raise leaves behind is nothing, as the SQL rollback), and a fake ERP.

The audit trail is a real signed chain (``MemoryApprovals.key``), so what ``rows_of`` returns verifies like the
SQL rows. Webhook deliveries are ``WebhookRow``s with the columns of ``webhook_deliveries``. A repository
method that writes refuses to in a ``read`` unit of work (``ReadOnly``), where the SQL one would commit the
statement on its own. ``tests/repository_cases.py`` runs the same cases on these and on the SQL ones.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.audit import GENESIS, AuditRow, Checkpoint, chain_hash, event_of, sign, sign_checkpoint
from erpilot_approval.domain.delegation import Delegation, RoleScope
from erpilot_approval.domain.edits import EditIntent
from erpilot_approval.domain.standing import StandingApproval
from erpilot_approval.domain.standing_runs import StandingRun
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer.ports import ListFilter
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1, RequestApprovalV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import PreparedOperationV1, PrepareOperationV1, PreviewV1
from erpilot_platform.broker import ReplyError
from erpilot_platform.ledger_signatures import sign_request
from erpilot_platform.refusals import Refused
from erpilot_platform.testing.memory_uow import MemoryTransaction, MemoryUnitOfWork

NOW = datetime(2026, 10, 19, 12, 0, 0, tzinfo=UTC)
LEDGER_KEY = Ed25519PrivateKey.generate()  # the ERP's: it signs every approval request it sends


@dataclass(frozen=True)
class Decision:
    """A row of the decision log."""

    pending_id: str
    actor: str
    action: str
    fingerprint: str
    comment: str | None
    at: datetime
    on_behalf_of: str | None = None


@dataclass
class WebhookRow:
    """A row of ``webhook_deliveries`` (what ``claim_due`` hands the dispatcher)."""

    delivery_id: int
    event_id: str
    event_type: str
    url: str
    pending_id: str | None
    body: str
    created_at: datetime
    next_attempt_at: datetime
    status: str = "pending"  # pending|delivered|dead|skipped
    attempts: int = 0
    finished_at: datetime | None = None
    last_error: str | None = None


@dataclass
class ApprovalState:
    approvals: dict[str, PendingApproval] = field(default_factory=dict)
    grants: dict[str, GrantV1] = field(default_factory=dict)  # pending_id -> the signed grant
    trace_contexts: dict[str, dict[str, str] | None] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    warnings: dict[str, datetime] = field(default_factory=dict)  # pending_id -> when its expiry warning went out
    edits: dict[str, EditIntent] = field(default_factory=dict)  # by the new operation_id
    audit: list[AuditRow] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    webhooks: list[WebhookRow] = field(default_factory=list)  # in delivery_id order
    delegations: dict[str, Delegation] = field(default_factory=dict)  # by delegation_id, in the order given
    standing: dict[str, StandingApproval] = field(default_factory=dict)  # by standing_id, in the order given
    standing_runs: dict[tuple[str, str], StandingRun] = field(default_factory=dict)  # by (session_id, run_id)


class _Rows:
    """A memory repository on one unit of work's copy of the state."""

    def __init__(self, transaction: MemoryTransaction[ApprovalState]):
        self.transaction = transaction
        self.state = transaction.state
        self.clock = transaction.clock

    def writing(self) -> None:
        self.transaction.require_writable()


class MemoryApprovalRepository(_Rows):
    async def get(self, pending_id: str, *, lock: bool = False) -> PendingApproval | None:
        return self.state.approvals.get(pending_id)

    async def get_by_operation(self, operation_id: str, *, votes: bool = True) -> PendingApproval | None:
        found = next((a for a in self.state.approvals.values() if a.operation_id == operation_id), None)
        return found if found is None or votes else replace(found, votes=())

    async def first_of_call(self, session_id: str, call_id: str) -> PendingApproval | None:
        found = next((a for a in self.state.approvals.values()
                      if (a.session_id, a.call_id, a.supersedes) == (session_id, call_id, None)), None)
        return replace(found, votes=()) if found is not None else None

    async def insert_new(self, approval: PendingApproval, *, trace_context: dict[str, str] | None = None) -> bool:
        self.writing()
        if await self.get_by_operation(approval.operation_id) is not None:
            return False
        if approval.supersedes is None and await self.first_of_call(approval.session_id, approval.call_id):
            raise ValueError(f"uq_approvals_call: call {approval.call_id} has an approval already")
        if approval.pending_id in self.state.approvals:
            raise ValueError(f"approval {approval.pending_id} exists already")  # the primary key
        self.state.approvals[approval.pending_id] = replace(approval, votes=())  # votes: their own table
        self.state.trace_contexts[approval.pending_id] = trace_context
        return True

    async def trace_context(self, pending_id: str) -> dict[str, str] | None:
        return self.state.trace_contexts.get(pending_id)

    async def append_vote(self, pending_id: str, vote: Vote) -> None:
        self.writing()
        stored = self.state.approvals[pending_id]
        if any(earlier.sub == vote.sub for earlier in stored.votes):
            raise ValueError(f"{vote.sub} voted on {pending_id} already")  # votes_one_per_person
        if any(earlier.principal == vote.principal for earlier in stored.votes):
            raise ValueError(f"{vote.principal}'s authority was used on {pending_id} already")  # one_per_principal
        self.state.approvals[pending_id] = replace(stored, votes=(*stored.votes, vote))

    async def save_outcome(self, approval: PendingApproval, grant: GrantV1 | None = None) -> None:
        self.writing()
        stored = self.state.approvals[approval.pending_id]
        self.state.approvals[approval.pending_id] = replace(
            stored, status=approval.status, decided_by=approval.decided_by, decided_at=approval.decided_at,
            comment=approval.comment, superseded_by=approval.superseded_by,
            decided_on_behalf_of=approval.decided_on_behalf_of)
        if grant is not None:
            self.state.grants[approval.pending_id] = grant

    async def append_decision(self, pending_id: str, *, actor: str, action: str, fingerprint: str,
                              comment: str | None, at: datetime, on_behalf_of: str | None = None) -> None:
        self.writing()
        self.state.decisions.append(Decision(pending_id, actor, action, fingerprint, comment, at, on_behalf_of))

    async def save_escalation(self, approval: PendingApproval) -> None:
        self.writing()
        stored = self.state.approvals[approval.pending_id]
        self.state.approvals[approval.pending_id] = replace(stored, required_roles=list(approval.required_roles),
                                                            escalated_at=approval.escalated_at)

    def _escalation_due(self, approval: PendingApproval, now: datetime) -> bool:
        return (approval.status == "pending" and approval.escalated_at is None and approval.escalate_at is not None
                and approval.expires_at > now)

    async def lock_due_escalations(self, now: datetime, limit: int) -> list[PendingApproval]:
        due = [a for a in self.state.approvals.values() if self._escalation_due(a, now) and a.escalate_at <= now]
        return sorted(due, key=lambda a: a.escalate_at)[:limit]

    async def seconds_to_next_escalation(self) -> float | None:
        now = self.clock()
        due = [a.escalate_at for a in self.state.approvals.values() if self._escalation_due(a, now)]
        return (min(due) - now).total_seconds() if due else None

    async def pending_of_calls(self, session_id: str, call_ids: list[str]) -> list[str]:
        return sorted(a.pending_id for a in self.state.approvals.values()
                      if a.session_id == session_id and a.call_id in call_ids and a.status == "pending")

    async def lock_due(self, now: datetime, limit: int) -> list[PendingApproval]:
        due = [a for a in self.state.approvals.values() if a.status == "pending" and a.expires_at <= now]
        return sorted(due, key=lambda a: a.expires_at)[:limit]

    async def status(self, pending_id: str) -> str | None:
        approval = self.state.approvals.get(pending_id)
        return approval.status if approval is not None else None

    async def list_decidable(self, roles: list[str], *, status: str, where: ListFilter, limit: int,
                             delegated: Sequence[RoleScope] = ()) -> list[PendingApproval]:
        def reaches(approval: PendingApproval) -> bool:
            own = any(role in approval.required_roles for role in roles)
            return own or any(approval.tool in scope.tools and any(role in approval.required_roles
                                                                   for role in scope.roles) for scope in delegated)

        found = [a for a in self.state.approvals.values()
                 if a.status == status and reaches(a) and _matches(a, where)]
        return sorted(found, key=lambda a: (a.created_at, a.pending_id), reverse=True)[:limit]

    async def naming(self, *, draft_ids: list[str], order_ids: list[str], roles: list[str],
                     statuses: tuple[str, ...], limit: int) -> list[PendingApproval]:
        found = [a for a in self.state.approvals.values()
                 if (a.arguments.get("draft_id") in draft_ids or a.arguments.get("order_id") in order_ids)
                 and a.status in statuses and any(role in a.required_roles for role in roles)]
        return sorted(found, key=lambda a: (a.created_at, a.pending_id), reverse=True)[:limit]

    async def count_pending(self) -> int:
        return sum(a.status == "pending" for a in self.state.approvals.values())

    async def seconds_to_next_deadline(self) -> float | None:
        deadlines = [a.expires_at for a in self.state.approvals.values() if a.status == "pending"]
        return (min(deadlines) - self.clock()).total_seconds() if deadlines else None

    async def lock_due_warnings(self, tool: str, warn_before: timedelta, now: datetime,
                                limit: int) -> list[PendingApproval]:
        due = [a for a in self.state.approvals.values()
               if a.status == "pending" and a.tool == tool and a.expires_at - warn_before <= now < a.expires_at
               and a.pending_id not in self.state.warnings]
        # The SQL rows come without their votes (``to_domain(row)``): the sweeper never reads them.
        return [replace(a, votes=()) for a in sorted(due, key=lambda a: a.expires_at)[:limit]]

    async def record_warning(self, pending_id: str, at: datetime) -> bool:
        self.writing()
        if pending_id in self.state.warnings:
            return False
        self.state.warnings[pending_id] = at
        return True


def _matches(approval: PendingApproval, where: ListFilter) -> bool:
    """``ListFilter`` as ``adapters.repository._filtered`` applies it (``before``: strictly older in
    (created_at, pending_id) order)."""
    for value, wanted in ((approval.session_id, where.session_id), (approval.tool, where.tool),
                          (approval.requested_by, where.requested_by)):
        if wanted is not None and value != wanted:
            return False
    if where.since is not None and approval.created_at < where.since:
        return False
    return where.before is None or (approval.created_at, approval.pending_id) < where.before


class MemoryEditIntents(_Rows):
    async def get(self, operation_id: str) -> EditIntent | None:
        return self.state.edits.get(operation_id)

    async def add(self, intent: EditIntent) -> bool:
        self.writing()
        if intent.operation_id in self.state.edits:
            return False
        self.state.edits[intent.operation_id] = intent
        return True

    async def refuse(self, operation_id: str, refusal: dict[str, Any]) -> None:
        self.writing()
        self.state.edits[operation_id] = replace(self.state.edits[operation_id], refusal=copy.deepcopy(refusal))

    async def forget(self, operation_id: str) -> None:
        self.writing()
        intent = self.state.edits.get(operation_id)
        if intent is not None and intent.refusal is None:
            del self.state.edits[operation_id]


class MemoryDelegations(_Rows):
    async def get(self, delegation_id: str, *, lock: bool = False) -> Delegation | None:
        return self.state.delegations.get(delegation_id)

    async def add(self, delegation: Delegation) -> bool:
        self.writing()
        if delegation.delegation_id in self.state.delegations:
            return False
        self.state.delegations[delegation.delegation_id] = delegation
        return True

    async def save_revocation(self, delegation: Delegation) -> None:
        self.writing()
        stored = self.state.delegations[delegation.delegation_id]
        self.state.delegations[delegation.delegation_id] = replace(stored, revoked_at=delegation.revoked_at)

    async def in_force(self, people: list[str], now: datetime, *, delegate_only: bool = False,
                       lock: bool = False) -> list[Delegation]:
        found = [d for d in self.state.delegations.values() if d.revoked_at is None and d.until > now
                 and (d.delegate in people or (not delegate_only and d.delegator in people))]
        return sorted(found, key=lambda d: (d.created_at, d.delegation_id))

    async def serialise_gives(self) -> None:
        """Units of work run one at a time here already."""


class MemoryStandingApprovals(_Rows):
    async def get(self, standing_id: str, *, lock: bool = False) -> StandingApproval | None:
        return self.state.standing.get(standing_id)

    async def add(self, standing: StandingApproval) -> bool:
        self.writing()
        if standing.standing_id in self.state.standing:
            return False
        self.state.standing[standing.standing_id] = standing
        return True

    async def save_revocation(self, standing: StandingApproval) -> None:
        self.writing()
        stored = self.state.standing[standing.standing_id]
        self.state.standing[standing.standing_id] = replace(stored, revoked_at=standing.revoked_at)

    async def in_force(self, now: datetime, *, giver: str | None = None, session_id: str | None = None,
                       tool: str | None = None, lock: bool = False) -> list[StandingApproval]:
        found = [s for s in self.state.standing.values() if s.revoked_at is None and s.until > now
                 and giver in (None, s.giver) and session_id in (None, s.session_id) and tool in (None, s.tool)]
        return sorted(found, key=lambda s: (s.created_at, s.standing_id))

    async def run(self, session_id: str, run_id: str) -> StandingRun:
        self.writing()
        return self.state.standing_runs.setdefault((session_id, run_id), StandingRun(session_id, run_id))

    async def save_run(self, run: StandingRun) -> None:
        self.writing()
        self.state.standing_runs[(run.session_id, run.run_id)] = run


class MemoryAuditLog(_Rows):
    def __init__(self, transaction: MemoryTransaction[ApprovalState], key: Ed25519PrivateKey):
        super().__init__(transaction)
        self.key = key

    def _head(self) -> tuple[int, str]:
        last = self.state.audit[-1] if self.state.audit else None
        return (last.seq, last.hash) if last is not None else (0, GENESIS)

    async def append(self, kind: str, *, pending_id: str | None, operation_id: str | None, actor: str | None,
                     data: dict[str, Any], once: bool = False) -> bool:
        self.writing()
        if once and any(e.kind == kind and e.operation_id == operation_id for e in self.state.audit):
            return False
        seq, prev = self._head()
        at, data = self.clock(), copy.deepcopy(data)
        digest = chain_hash(prev, event_of(seq + 1, at, kind, pending_id, operation_id, actor, data))
        self.state.audit.append(AuditRow(seq=seq + 1, at=at, kind=kind, pending_id=pending_id,
                                         operation_id=operation_id, actor=actor, data=data, prev_hash=prev,
                                         hash=digest, signature=sign(self.key, digest)))
        return True

    async def checkpoint(self) -> Checkpoint | None:
        self.writing()
        seq, digest = self._head()
        if seq == 0 or any(mark.seq == seq for mark in self.state.checkpoints):
            return None
        mark = Checkpoint(seq=seq, hash=digest, signed_at=self.clock(),
                          signature=sign_checkpoint(self.key, seq, digest))
        self.state.checkpoints.append(mark)
        return mark

    async def rows_after(self, after_seq: int, *, since: datetime | None, limit: int) -> list[AuditRow]:
        return [row for row in self.state.audit if row.seq > after_seq and (since is None or row.at >= since)][:limit]

    async def checkpoints(self) -> list[Checkpoint]:
        return sorted(self.state.checkpoints, key=lambda mark: mark.seq)

    async def rows_of(self, *, pending_id: str | None, operation_id: str | None, since: datetime | None,
                      limit: int) -> list[AuditRow]:
        return [row for row in self.state.audit
                if (pending_id is None or row.pending_id == pending_id)
                and (operation_id is None or row.operation_id == operation_id)
                and (since is None or row.at >= since)][:limit]


class MemoryWebhookDeliveries(_Rows):
    def _row(self, delivery_id: int) -> WebhookRow:
        return next(row for row in self.state.webhooks if row.delivery_id == delivery_id)

    async def add(self, *, event_id: str, event_type: str, pending_id: str | None, body: str,
                  urls: list[str]) -> int:
        self.writing()
        seen = {(row.event_id, row.url) for row in self.state.webhooks}  # webhook_deliveries_event_url
        added = 0
        for url in urls:
            if (event_id, url) in seen:
                continue
            seen.add((event_id, url))
            now = self.clock()
            self.state.webhooks.append(WebhookRow(
                delivery_id=len(self.state.webhooks) + 1, event_id=event_id, event_type=event_type, url=url,
                pending_id=pending_id, body=body, created_at=now, next_attempt_at=now))
            added += 1
        return added

    async def claim_due(self, now: datetime, limit: int, lease: timedelta) -> list[Any]:
        self.writing()
        due = sorted((row for row in self.state.webhooks if row.status == "pending" and row.next_attempt_at <= now),
                     key=lambda row: row.next_attempt_at)[:limit]
        for row in due:
            row.next_attempt_at = now + lease
        return [replace(row) for row in due]  # a snapshot, as the RETURNING rows are

    async def finish(self, delivery_id: int, *, status: str, attempts: int, at: datetime,
                     error: str | None = None) -> None:
        self.writing()
        row = self._row(delivery_id)
        row.status, row.attempts, row.finished_at, row.last_error = status, attempts, at, error

    async def retry_later(self, delivery_id: int, *, attempts: int, at: datetime, error: str) -> None:
        self.writing()
        row = self._row(delivery_id)
        row.attempts, row.next_attempt_at, row.last_error = attempts, at, error

    async def seconds_to_next(self) -> float | None:
        due = [row.next_attempt_at for row in self.state.webhooks if row.status == "pending"]
        return (min(due) - self.clock()).total_seconds() if due else None


class MemoryWork:
    """The approval service's ``Work`` on one memory transaction."""

    def __init__(self, transaction: MemoryTransaction[ApprovalState], key: Ed25519PrivateKey):
        self.transaction = transaction
        self.approvals = MemoryApprovalRepository(transaction)
        self.edits = MemoryEditIntents(transaction)
        self.delegations = MemoryDelegations(transaction)
        self.standing = MemoryStandingApprovals(transaction)
        self.audit = MemoryAuditLog(transaction, key)
        self.webhooks = MemoryWebhookDeliveries(transaction)

    async def now(self) -> datetime:
        return await self.transaction.now()

    async def emit(self, subject: str, payload: BaseModel, msg_id: str | None = None) -> None:
        await self.transaction.emit(subject, payload, msg_id)


class MemoryApprovals(MemoryUnitOfWork[ApprovalState, MemoryWork]):
    """The approval service's unit of work in memory; ``commits`` counts the units of work that committed."""

    def __init__(self, *, now: datetime = NOW, key: Ed25519PrivateKey | None = None):
        self.key = key or Ed25519PrivateKey.generate()
        super().__init__(ApprovalState(), lambda transaction: MemoryWork(transaction, self.key), now=now)
        self.commits = 0

    async def run(self, work):
        result = await super().run(work)
        self.commits += 1
        return result

    def events(self, subject: str) -> list[dict[str, Any]]:
        """The committed messages of one subject, oldest first."""
        return self.sent_on(subject)


class FakeErp:
    """The ERP as the approval service sees it: it prepares edited operations and sends their requests back as
    its outbox would (``deliver``), built from its own record of the operation they supersede (``record``) and
    signed with the ledger key (``LEDGER_KEY``).

    ``refusal``: the error every ``prepare`` answers with instead. ``hold``: keep the requests in ``outbox``
    until ``relay()`` (to act between the ERP's answer and the request's arrival).
    """

    def __init__(self) -> None:
        self.records: dict[str, RequestApprovalV1] = {}
        self.prepares: list[PrepareOperationV1] = []
        self.outbox: list[RequestApprovalV1] = []
        self.refusal: ReplyV1 | None = None
        self.hold = False
        self.deliver: Callable[[RequestApprovalV1], Awaitable[Any]] | None = None
        self.answers: list[Any] = []  # what each delivered request was answered (a record, or the Refused)

    def record(self, cmd: RequestApprovalV1) -> None:
        """The ledger prepared ``cmd``'s operation and requested its approval exactly so."""
        self.records[cmd.operation_id] = cmd

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        self.prepares.append(cmd)
        if self.refusal is not None:
            raise ReplyError(subjects.ERP_CMD_PREPARE, self.refusal)
        preview = PreviewV1(operation="Submit order", object=f"Draft {cmd.arguments.get('draft_id')}",
                            target="Nordwind", amount_minor=4_200, currency="EUR")
        if cmd.operation_id not in self.records:  # idempotent: a repeat sends nothing new
            superseded = self.records[cmd.supersedes]
            request = RequestApprovalV1(
                call_id=cmd.call_id, session_id=cmd.session_id, tool=cmd.tool,
                tool_schema_version=cmd.tool_schema_version, arguments=cmd.arguments, fingerprint=cmd.fingerprint,
                operation_id=cmd.operation_id, preview=preview,
                requested_by=superseded.requested_by, assertion=superseded.assertion,
                asserted_at=superseded.asserted_at, supersedes=cmd.supersedes)
            request = sign_request(request, LEDGER_KEY)
            self.records[cmd.operation_id] = request
            self.outbox.append(request)
        if not self.hold:
            await self.relay()
        return PreparedOperationV1(operation_id=cmd.operation_id, tool=cmd.tool, fingerprint=cmd.fingerprint,
                                   preview=preview)

    async def relay(self) -> None:
        """Deliver the requests waiting in the outbox, oldest first."""
        while self.outbox:
            try:
                self.answers.append(await self.deliver(self.outbox.pop(0)))
            except Refused as refusal:  # answered and acknowledged: the relay's job is done
                self.answers.append(refusal)
