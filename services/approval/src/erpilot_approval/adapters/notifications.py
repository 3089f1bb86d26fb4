"""Persistence of outgoing notifications: webhook deliveries and the once-only expiry warnings."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exists, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_approval.adapters.repository import to_domain
from erpilot_approval.adapters.tables import approvals, expiry_warnings, webhook_deliveries
from erpilot_approval.domain.approvals import PendingApproval

_PENDING = webhook_deliveries.c.status == "pending"


async def add_deliveries(conn: AsyncConnection, *, event_id: str, event_type: str, pending_id: str | None,
                         body: str, urls: list[str]) -> int:
    """One delivery per endpoint; an event seen again (redelivery) adds nothing. Returns how many were new."""
    if not urls:
        return 0
    rows = [{"event_id": event_id, "event_type": event_type, "pending_id": pending_id, "body": body, "url": url}
            for url in urls]
    stmt = insert(webhook_deliveries).values(rows).on_conflict_do_nothing(
        constraint="webhook_deliveries_event_url").returning(webhook_deliveries.c.delivery_id)
    return len((await conn.execute(stmt)).all())


async def claim_due(conn: AsyncConnection, now: datetime, limit: int, lease: timedelta) -> list[Any]:
    """Due deliveries, leased for ``lease`` (another replica skips them meanwhile; a crash frees them)."""
    due = (select(webhook_deliveries.c.delivery_id)
           .where(_PENDING, webhook_deliveries.c.next_attempt_at <= now)
           .order_by(webhook_deliveries.c.next_attempt_at).limit(limit)
           .with_for_update(skip_locked=True)).scalar_subquery()
    stmt = (webhook_deliveries.update().where(webhook_deliveries.c.delivery_id.in_(due))
            .values(next_attempt_at=now + lease).returning(*webhook_deliveries.c))
    return list((await conn.execute(stmt)).all())


async def finish(conn: AsyncConnection, delivery_id: int, *, status: str, attempts: int, at: datetime,
                 error: str | None = None) -> None:
    """A delivery ends: ``delivered``, ``dead`` (gave up: the dead letter) or ``skipped``."""
    await conn.execute(webhook_deliveries.update().where(webhook_deliveries.c.delivery_id == delivery_id).values(
        status=status, attempts=attempts, finished_at=at, last_error=error))


async def retry_later(conn: AsyncConnection, delivery_id: int, *, attempts: int, at: datetime, error: str) -> None:
    await conn.execute(webhook_deliveries.update().where(webhook_deliveries.c.delivery_id == delivery_id).values(
        attempts=attempts, next_attempt_at=at, last_error=error))


async def seconds_to_next_delivery(conn: AsyncConnection) -> float | None:
    until = func.min(webhook_deliveries.c.next_attempt_at) - func.clock_timestamp()
    value = await conn.scalar(select(func.extract("epoch", until)).where(_PENDING))
    return float(value) if value is not None else None


async def list_deliveries(conn: AsyncConnection, *, status: str | None = None) -> list[Any]:
    stmt = select(webhook_deliveries).order_by(webhook_deliveries.c.delivery_id)
    if status is not None:
        stmt = stmt.where(webhook_deliveries.c.status == status)
    return list((await conn.execute(stmt)).all())


async def approval_status(conn: AsyncConnection, pending_id: str) -> str | None:
    return await conn.scalar(select(approvals.c.status).where(approvals.c.pending_id == pending_id))


async def lock_due_warnings(conn: AsyncConnection, tool: str, warn_before: timedelta, now: datetime,
                            limit: int) -> list[PendingApproval]:
    """Pending approvals of ``tool`` within ``warn_before`` of their deadline and not yet warned, locked
    (a decision holding a row leaves it to the decision: decided approvals are never warned)."""
    warned = exists().where(expiry_warnings.c.pending_id == approvals.c.pending_id)
    stmt = (select(approvals)
            .where(approvals.c.status == "pending", approvals.c.tool == tool,
                   approvals.c.expires_at - warn_before <= now, approvals.c.expires_at > now, ~warned)
            .order_by(approvals.c.expires_at).limit(limit)
            .with_for_update(skip_locked=True))
    return [to_domain(row) for row in (await conn.execute(stmt))]


async def record_warning(conn: AsyncConnection, pending_id: str, at: datetime) -> bool:
    stmt = (insert(expiry_warnings).values(pending_id=pending_id, warned_at=at)
            .on_conflict_do_nothing().returning(expiry_warnings.c.pending_id))
    return (await conn.execute(stmt)).first() is not None
