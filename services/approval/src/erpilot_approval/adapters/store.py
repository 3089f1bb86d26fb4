"""The approvals in PostgreSQL: the ``Work`` of ``service_layer.ports`` on the platform's ``UnitOfWork``.

One unit of work is one transaction on one connection (``erpilot_platform.uow``: retried on a serialization
failure or deadlock); the repositories are ``adapters.repository`` bound to that connection, the audit trail
``adapters.audit_log`` (signed with the service's key), the outbox the service's ``outbox`` table. ``now()`` is
``clock_timestamp()``: the database's clock at the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_approval.adapters import audit_log, delegations, notifications, repository, standing
from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.audit import AuditRow, Checkpoint
from erpilot_approval.domain.delegation import Delegation, RoleScope
from erpilot_approval.domain.edits import EditIntent
from erpilot_approval.domain.standing import StandingApproval
from erpilot_approval.domain.standing_runs import StandingRun
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer.ports import ListFilter
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_platform.outbox import Outbox
from erpilot_platform.uow import Transaction, UnitOfWork


class SqlApprovalRepository:
    def __init__(self, conn: AsyncConnection):
        self.conn = conn

    async def get(self, pending_id: str, *, lock: bool = False) -> PendingApproval | None:
        return await repository.get(self.conn, pending_id, lock=lock)

    async def get_by_operation(self, operation_id: str, *, votes: bool = True) -> PendingApproval | None:
        return await repository.get_by_operation(self.conn, operation_id, votes=votes)

    async def first_of_call(self, session_id: str, call_id: str) -> PendingApproval | None:
        return await repository.first_of_call(self.conn, session_id, call_id)

    async def insert_new(self, approval: PendingApproval, *, trace_context: dict[str, str] | None = None) -> bool:
        return await repository.insert_new(self.conn, approval, trace_context=trace_context)

    async def trace_context(self, pending_id: str) -> dict[str, str] | None:
        return await repository.trace_context(self.conn, pending_id)

    async def append_vote(self, pending_id: str, vote: Vote) -> None:
        await repository.append_vote(self.conn, pending_id, vote)

    async def save_outcome(self, approval: PendingApproval, grant: GrantV1 | None = None) -> None:
        await repository.save_outcome(self.conn, approval, grant)

    async def append_decision(self, pending_id: str, *, actor: str, action: str, fingerprint: str,
                              comment: str | None, at: datetime, on_behalf_of: str | None = None) -> None:
        await repository.append_decision(self.conn, pending_id, actor=actor, action=action,
                                         fingerprint=fingerprint, comment=comment, at=at, on_behalf_of=on_behalf_of)

    async def save_escalation(self, approval: PendingApproval) -> None:
        await repository.save_escalation(self.conn, approval)

    async def lock_due_escalations(self, now: datetime, limit: int) -> list[PendingApproval]:
        return await repository.lock_due_escalations(self.conn, now, limit)

    async def seconds_to_next_escalation(self) -> float | None:
        return await repository.seconds_to_next_escalation(self.conn)

    async def pending_of_calls(self, session_id: str, call_ids: list[str]) -> list[str]:
        return await repository.pending_of_calls(self.conn, session_id, call_ids)

    async def lock_due(self, now: datetime, limit: int) -> list[PendingApproval]:
        return await repository.lock_due(self.conn, now, limit)

    async def status(self, pending_id: str) -> str | None:
        return await notifications.approval_status(self.conn, pending_id)

    async def list_decidable(self, roles: list[str], *, status: str, where: ListFilter, limit: int,
                             delegated: Sequence[RoleScope] = ()) -> list[PendingApproval]:
        return await repository.list_decidable(self.conn, roles, status=status, where=where, limit=limit,
                                               delegated=delegated)

    async def naming(self, *, draft_ids: list[str], order_ids: list[str], roles: list[str],
                     statuses: tuple[str, ...], limit: int) -> list[PendingApproval]:
        return await repository.naming(self.conn, draft_ids=draft_ids, order_ids=order_ids, roles=roles,
                                       statuses=statuses, limit=limit)

    async def count_pending(self) -> int:
        return await repository.count_pending(self.conn)

    async def seconds_to_next_deadline(self) -> float | None:
        return await repository.seconds_to_next_deadline(self.conn)

    async def lock_due_warnings(self, tool: str, warn_before: timedelta, now: datetime,
                                limit: int) -> list[PendingApproval]:
        return await notifications.lock_due_warnings(self.conn, tool, warn_before, now, limit)

    async def record_warning(self, pending_id: str, at: datetime) -> bool:
        return await notifications.record_warning(self.conn, pending_id, at)


class SqlAuditLog:
    def __init__(self, conn: AsyncConnection, key: Ed25519PrivateKey):
        self.conn = conn
        self.chain = audit_log.Chain(conn, key)  # this transaction's: it carries the head once locked

    async def append(self, kind: str, *, pending_id: str | None, operation_id: str | None, actor: str | None,
                     data: dict[str, Any], once: bool = False) -> bool:
        return await self.chain.append(kind, pending_id=pending_id, operation_id=operation_id, actor=actor,
                                       data=data, once=once)

    async def checkpoint(self) -> Checkpoint | None:
        return await self.chain.checkpoint()

    async def rows_after(self, after_seq: int, *, since: datetime | None, limit: int) -> list[AuditRow]:
        return await audit_log.page(self.conn, after=after_seq, since=since, limit=limit)

    async def checkpoints(self) -> list[Checkpoint]:
        return await audit_log.checkpoints(self.conn)

    async def rows_of(self, *, pending_id: str | None, operation_id: str | None, since: datetime | None,
                      limit: int) -> list[AuditRow]:
        return await audit_log.of(self.conn, pending_id=pending_id, operation_id=operation_id, since=since,
                                  limit=limit)


class SqlWebhookDeliveries:
    def __init__(self, conn: AsyncConnection):
        self.conn = conn

    async def add(self, *, event_id: str, event_type: str, pending_id: str | None, body: str,
                  urls: list[str]) -> int:
        return await notifications.add_deliveries(self.conn, event_id=event_id, event_type=event_type,
                                                  pending_id=pending_id, body=body, urls=urls)

    async def claim_due(self, now: datetime, limit: int, lease: timedelta) -> list[Any]:
        return await notifications.claim_due(self.conn, now, limit, lease)

    async def finish(self, delivery_id: int, *, status: str, attempts: int, at: datetime,
                     error: str | None = None) -> None:
        await notifications.finish(self.conn, delivery_id, status=status, attempts=attempts, at=at, error=error)

    async def retry_later(self, delivery_id: int, *, attempts: int, at: datetime, error: str) -> None:
        await notifications.retry_later(self.conn, delivery_id, attempts=attempts, at=at, error=error)

    async def seconds_to_next(self) -> float | None:
        return await notifications.seconds_to_next_delivery(self.conn)


class SqlEditIntents:
    def __init__(self, conn: AsyncConnection):
        self.conn = conn

    async def get(self, operation_id: str) -> EditIntent | None:
        return await repository.edit_intent(self.conn, operation_id)

    async def add(self, intent: EditIntent) -> bool:
        return await repository.add_edit_intent(self.conn, intent)

    async def refuse(self, operation_id: str, refusal: dict[str, Any]) -> None:
        await repository.refuse_edit_intent(self.conn, operation_id, refusal)

    async def forget(self, operation_id: str) -> None:
        await repository.forget_edit_intent(self.conn, operation_id)


class SqlDelegations:
    def __init__(self, conn: AsyncConnection):
        self.conn = conn

    async def get(self, delegation_id: str, *, lock: bool = False) -> Delegation | None:
        return await delegations.get(self.conn, delegation_id, lock=lock)

    async def add(self, delegation: Delegation) -> bool:
        return await delegations.add(self.conn, delegation)

    async def save_revocation(self, delegation: Delegation) -> None:
        await delegations.save_revocation(self.conn, delegation)

    async def in_force(self, people: list[str], now: datetime, *, delegate_only: bool = False,
                       lock: bool = False) -> list[Delegation]:
        return await delegations.in_force(self.conn, people, now, delegate_only=delegate_only, lock=lock)

    async def serialise_gives(self) -> None:
        await delegations.serialise_gives(self.conn)


class SqlStandingApprovals:
    def __init__(self, conn: AsyncConnection):
        self.conn = conn

    async def get(self, standing_id: str, *, lock: bool = False) -> StandingApproval | None:
        return await standing.get(self.conn, standing_id, lock=lock)

    async def add(self, given: StandingApproval) -> bool:
        return await standing.add(self.conn, given)

    async def save_revocation(self, revoked: StandingApproval) -> None:
        await standing.save_revocation(self.conn, revoked)

    async def in_force(self, now: datetime, *, giver: str | None = None, session_id: str | None = None,
                       tool: str | None = None, lock: bool = False) -> list[StandingApproval]:
        return await standing.in_force(self.conn, now, giver=giver, session_id=session_id, tool=tool, lock=lock)

    async def run(self, session_id: str, run_id: str) -> StandingRun:
        return await standing.run(self.conn, session_id, run_id)

    async def save_run(self, run: StandingRun) -> None:
        await standing.save_run(self.conn, run)


class SqlApprovalWork:
    """The approval service's ``Work`` on one transaction of the platform's unit of work."""

    def __init__(self, transaction: Transaction, key: Ed25519PrivateKey):
        self.transaction = transaction
        conn = transaction.conn
        self.approvals = SqlApprovalRepository(conn)
        self.edits = SqlEditIntents(conn)
        self.delegations = SqlDelegations(conn)
        self.standing = SqlStandingApprovals(conn)
        self.audit = SqlAuditLog(conn, key)
        self.webhooks = SqlWebhookDeliveries(conn)

    async def now(self) -> datetime:
        return await self.transaction.now()

    async def emit(self, subject: str, payload: BaseModel, msg_id: str | None = None) -> None:
        await self.transaction.emit(subject, payload, msg_id)


def unit_of_work(engine: AsyncEngine, outbox: Outbox, key: Ed25519PrivateKey) -> UnitOfWork[SqlApprovalWork]:
    """The approval service's unit of work on PostgreSQL (its audit rows signed with ``key``)."""
    return UnitOfWork(engine, lambda transaction: SqlApprovalWork(transaction, key), outbox=outbox)
