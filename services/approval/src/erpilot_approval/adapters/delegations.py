"""Persistence of delegations (approval schema). Rows are never deleted; a revocation is a time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_approval.adapters.tables import delegations
from erpilot_approval.domain.delegation import Delegation
from erpilot_platform import advisory_locks


def _to_domain(row: Any) -> Delegation:
    return Delegation(delegation_id=row.delegation_id, delegator=row.delegator, delegate=row.delegate,
                      roles=tuple(row.roles), tools=tuple(row.tools) if row.tools is not None else None,
                      until=row.until, created_at=row.created_at, revoked_at=row.revoked_at)


async def get(conn: AsyncConnection, delegation_id: str, *, lock: bool = False) -> Delegation | None:
    stmt = select(delegations).where(delegations.c.delegation_id == delegation_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await conn.execute(stmt)).first()
    return _to_domain(row) if row is not None else None


async def add(conn: AsyncConnection, delegation: Delegation) -> bool:
    """Store a new delegation; False if one with its id exists (a redelivered give)."""
    stmt = (insert(delegations).values(
        delegation_id=delegation.delegation_id, delegator=delegation.delegator, delegate=delegation.delegate,
        roles=list(delegation.roles), tools=list(delegation.tools) if delegation.tools is not None else None,
        until=delegation.until, created_at=delegation.created_at, revoked_at=delegation.revoked_at)
        .on_conflict_do_nothing(index_elements=[delegations.c.delegation_id]).returning(delegations.c.delegation_id))
    return (await conn.execute(stmt)).first() is not None


async def save_revocation(conn: AsyncConnection, delegation: Delegation) -> None:
    await conn.execute(delegations.update().where(delegations.c.delegation_id == delegation.delegation_id)
                       .values(revoked_at=delegation.revoked_at))


async def in_force(conn: AsyncConnection, people: list[str], now: datetime, *, delegate_only: bool = False,
                   lock: bool = False) -> list[Delegation]:
    """The delegations in force at ``now`` to these people (and, unless ``delegate_only``, from them), oldest
    first. ``lock``: FOR SHARE, so a revocation waits for the decision that uses one (and then ends it)."""
    whom = delegations.c.delegate.in_(people)
    if not delegate_only:
        whom = or_(whom, delegations.c.delegator.in_(people))
    stmt = (select(delegations).where(whom, delegations.c.revoked_at.is_(None), delegations.c.until > now)
            .order_by(delegations.c.created_at, delegations.c.delegation_id))
    if lock:
        stmt = stmt.with_for_update(read=True)
    return [_to_domain(row) for row in await conn.execute(stmt)]


async def serialise_gives(conn: AsyncConnection) -> None:
    """Gives one at a time (until the transaction ends): two that would form a chain cannot both pass its check."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": advisory_locks.APPROVAL_DELEGATIONS})
