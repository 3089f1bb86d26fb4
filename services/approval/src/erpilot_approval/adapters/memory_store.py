"""The approvals in memory (the ``ApprovalStore`` of ``service_layer.ports``), for unit tests and anything
else that needs the use cases without a database.

``MemoryApprovalStore`` holds what is committed. A unit of work runs on a deep copy of it that replaces
the committed state only when the work returns, so a raise (a failpoint, a refused item of a bulk
decision) leaves nothing behind, as the SQL rollback does. Units of work run one at a time (the SQL row
locks serialise the ones that touch the same approval). The clock is ``store.clock``: set it, or
``advance`` it, to move time; ``now()`` reads it. The audit trail is a real signed chain (``key``: the
service's signing key, a fresh one by default), so what ``rows_of`` returns verifies like the SQL rows.
Webhook deliveries are ``WebhookRow``s with the columns of ``webhook_deliveries``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.audit import GENESIS, AuditRow, Checkpoint, chain_hash, event_of, sign, sign_checkpoint
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer.ports import ListFilter
from erpilot_contracts.approval.v1 import GrantV1

T = TypeVar("T")


@dataclass(frozen=True)
class Decision:
    """A row of the decision log."""

    pending_id: str
    actor: str
    action: str
    fingerprint: str
    comment: str | None
    at: datetime


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
    audit: list[AuditRow] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    webhooks: list[WebhookRow] = field(default_factory=list)  # in delivery_id order
    outbox: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (subject, payload as JSON)


class MemoryApprovalRepository:
    def __init__(self, state: ApprovalState, clock: Callable[[], datetime]):
        self.state, self.clock = state, clock

    async def get(self, pending_id: str, *, lock: bool = False) -> PendingApproval | None:
        return self.state.approvals.get(pending_id)

    async def get_by_operation(self, operation_id: str, *, votes: bool = True) -> PendingApproval | None:
        return next((a for a in self.state.approvals.values() if a.operation_id == operation_id), None)

    async def insert_new(self, approval: PendingApproval, *, trace_context: dict[str, str] | None = None) -> bool:
        if await self.get_by_operation(approval.operation_id) is not None:
            return False
        if approval.pending_id in self.state.approvals:
            raise ValueError(f"approval {approval.pending_id} exists already")  # the primary key
        self.state.approvals[approval.pending_id] = approval
        self.state.trace_contexts[approval.pending_id] = trace_context
        return True

    async def trace_context(self, pending_id: str) -> dict[str, str] | None:
        return self.state.trace_contexts.get(pending_id)

    async def append_vote(self, pending_id: str, vote: Vote) -> None:
        stored = self.state.approvals[pending_id]
        if any(earlier.sub == vote.sub for earlier in stored.votes):
            raise ValueError(f"{vote.sub} voted on {pending_id} already")  # votes_one_per_person
        self.state.approvals[pending_id] = replace(stored, votes=(*stored.votes, vote))

    async def save_outcome(self, approval: PendingApproval, grant: GrantV1 | None = None) -> None:
        stored = self.state.approvals[approval.pending_id]
        self.state.approvals[approval.pending_id] = replace(
            stored, status=approval.status, decided_by=approval.decided_by, decided_at=approval.decided_at,
            comment=approval.comment, superseded_by=approval.superseded_by)
        if grant is not None:
            self.state.grants[approval.pending_id] = grant

    async def append_decision(self, pending_id: str, *, actor: str, action: str, fingerprint: str,
                              comment: str | None, at: datetime) -> None:
        self.state.decisions.append(Decision(pending_id, actor, action, fingerprint, comment, at))

    async def pending_of_calls(self, session_id: str, call_ids: list[str]) -> list[str]:
        return sorted(a.pending_id for a in self.state.approvals.values()
                      if a.session_id == session_id and a.call_id in call_ids and a.status == "pending")

    async def lock_due(self, now: datetime, limit: int) -> list[PendingApproval]:
        due = [a for a in self.state.approvals.values() if a.status == "pending" and a.expires_at <= now]
        return sorted(due, key=lambda a: a.expires_at)[:limit]

    async def status(self, pending_id: str) -> str | None:
        approval = self.state.approvals.get(pending_id)
        return approval.status if approval is not None else None

    async def list_decidable(self, roles: list[str], *, status: str, where: ListFilter,
                             limit: int) -> list[PendingApproval]:
        found = [a for a in self.state.approvals.values()
                 if a.status == status and any(role in a.required_roles for role in roles) and _matches(a, where)]
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


class MemoryAuditLog:
    def __init__(self, state: ApprovalState, key: Ed25519PrivateKey, clock: Callable[[], datetime]):
        self.state, self.key, self.clock = state, key, clock

    def _head(self) -> tuple[int, str]:
        last = self.state.audit[-1] if self.state.audit else None
        return (last.seq, last.hash) if last is not None else (0, GENESIS)

    async def append(self, kind: str, *, pending_id: str | None, operation_id: str | None, actor: str | None,
                     data: dict[str, Any], once: bool = False) -> bool:
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
        seq, digest = self._head()
        if seq == 0 or any(mark.seq == seq for mark in self.state.checkpoints):
            return None
        mark = Checkpoint(seq=seq, hash=digest, signed_at=self.clock(),
                          signature=sign_checkpoint(self.key, seq, digest))
        self.state.checkpoints.append(mark)
        return mark

    async def rows_of(self, *, pending_id: str | None, operation_id: str | None, since: datetime | None,
                      limit: int) -> list[AuditRow]:
        return [row for row in self.state.audit
                if (pending_id is None or row.pending_id == pending_id)
                and (operation_id is None or row.operation_id == operation_id)
                and (since is None or row.at >= since)][:limit]


class MemoryWebhookDeliveries:
    def __init__(self, state: ApprovalState, clock: Callable[[], datetime]):
        self.state, self.clock = state, clock

    def _row(self, delivery_id: int) -> WebhookRow:
        return next(row for row in self.state.webhooks if row.delivery_id == delivery_id)

    async def add(self, *, event_id: str, event_type: str, pending_id: str | None, body: str,
                  urls: list[str]) -> int:
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
        due = sorted((row for row in self.state.webhooks if row.status == "pending" and row.next_attempt_at <= now),
                     key=lambda row: row.next_attempt_at)[:limit]
        for row in due:
            row.next_attempt_at = now + lease
        return [replace(row) for row in due]  # a snapshot, as the RETURNING rows are

    async def finish(self, delivery_id: int, *, status: str, attempts: int, at: datetime,
                     error: str | None = None) -> None:
        row = self._row(delivery_id)
        row.status, row.attempts, row.finished_at, row.last_error = status, attempts, at, error

    async def retry_later(self, delivery_id: int, *, attempts: int, at: datetime, error: str) -> None:
        row = self._row(delivery_id)
        row.attempts, row.next_attempt_at, row.last_error = attempts, at, error

    async def seconds_to_next(self) -> float | None:
        due = [row.next_attempt_at for row in self.state.webhooks if row.status == "pending"]
        return (min(due) - self.clock()).total_seconds() if due else None


class MemoryApprovalUnitOfWork:
    def __init__(self, state: ApprovalState, store: MemoryApprovalStore):
        self.state, self.store = state, store
        self.approvals = MemoryApprovalRepository(state, store.now)
        self.audit = MemoryAuditLog(state, store.key, store.now)
        self.webhooks = MemoryWebhookDeliveries(state, store.now)

    async def now(self) -> datetime:
        return self.store.clock

    async def emit(self, subject: str, payload: BaseModel) -> None:
        self.state.outbox.append((subject, payload.model_dump(mode="json")))


class MemoryApprovalStore:
    def __init__(self, state: ApprovalState | None = None, *, clock: datetime | None = None,
                 key: Ed25519PrivateKey | None = None):
        self.state = state or ApprovalState()
        self.clock = clock or datetime.now(UTC)
        self.key = key or Ed25519PrivateKey.generate()
        self.commits = 0
        self.wakes = 0
        self._one_at_a_time = asyncio.Lock()

    def now(self) -> datetime:
        return self.clock

    def advance(self, **delta: float) -> datetime:
        """Move the clock on (``advance(seconds=5)``); returns the new time."""
        self.clock += timedelta(**delta)
        return self.clock

    def events(self, subject: str) -> list[dict[str, Any]]:
        """The committed events of one subject, oldest first."""
        return [payload for emitted, payload in self.state.outbox if emitted == subject]

    async def run(self, work: Callable[[MemoryApprovalUnitOfWork], Awaitable[T]]) -> T:
        async with self._one_at_a_time:
            staged = copy.deepcopy(self.state)
            result = await work(MemoryApprovalUnitOfWork(staged, self))
            self.state = staged
            self.commits += 1
            return result

    async def read(self, work: Callable[[MemoryApprovalUnitOfWork], Awaitable[T]]) -> T:
        async with self._one_at_a_time:
            return await work(MemoryApprovalUnitOfWork(copy.deepcopy(self.state), self))

    read_one = read

    def wake(self) -> None:
        self.wakes += 1
