"""The approvals in memory (the ``ApprovalStore`` of ``service_layer.ports``), for unit tests and anything
else that needs the use cases without a database.

``MemoryApprovalStore`` holds what is committed. A unit of work runs on a deep copy of it that replaces
the committed state only when the work returns, so a raise (a failpoint, a refused item of a bulk
decision) leaves nothing behind, as the SQL rollback does. Units of work run one at a time (the SQL row
locks serialise the ones that touch the same approval). The clock is ``store.clock``: set it, or
``advance`` it, to move time; ``now()`` reads it.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.votes import Vote
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


@dataclass(frozen=True)
class AuditEntry:
    kind: str
    pending_id: str | None
    operation_id: str | None
    actor: str | None
    data: dict[str, Any]


@dataclass
class ApprovalState:
    approvals: dict[str, PendingApproval] = field(default_factory=dict)
    grants: dict[str, GrantV1] = field(default_factory=dict)  # pending_id -> the signed grant
    trace_contexts: dict[str, dict[str, str] | None] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    outbox: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (subject, payload as JSON)


class MemoryApprovalRepository:
    def __init__(self, state: ApprovalState):
        self.state = state

    async def get(self, pending_id: str, *, lock: bool = False) -> PendingApproval | None:
        return self.state.approvals.get(pending_id)

    async def get_by_operation(self, operation_id: str) -> PendingApproval | None:
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


class MemoryAuditLog:
    def __init__(self, state: ApprovalState):
        self.state = state

    async def append(self, kind: str, *, pending_id: str | None, operation_id: str | None, actor: str | None,
                     data: dict[str, Any], once: bool = False) -> bool:
        if once and any(e.kind == kind and e.operation_id == operation_id for e in self.state.audit):
            return False
        self.state.audit.append(AuditEntry(kind, pending_id, operation_id, actor, copy.deepcopy(data)))
        return True


class MemoryApprovalUnitOfWork:
    def __init__(self, state: ApprovalState, store: MemoryApprovalStore):
        self.state, self.store = state, store
        self.approvals = MemoryApprovalRepository(state)
        self.audit = MemoryAuditLog(state)

    async def now(self) -> datetime:
        return self.store.clock

    async def emit(self, subject: str, payload: BaseModel) -> None:
        self.state.outbox.append((subject, payload.model_dump(mode="json")))


class MemoryApprovalStore:
    def __init__(self, state: ApprovalState | None = None, *, clock: datetime | None = None):
        self.state = state or ApprovalState()
        self.clock = clock or datetime.now(UTC)
        self.commits = 0
        self.wakes = 0
        self._one_at_a_time = asyncio.Lock()

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

    def wake(self) -> None:
        self.wakes += 1
