"""Persistence of standing approvals (approval schema). Rows are never deleted; a revocation is a time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_approval.adapters.tables import standing_approvals as table
from erpilot_approval.adapters.tables import standing_runs as runs
from erpilot_approval.domain.standing import StandingApproval
from erpilot_approval.domain.standing_runs import StandingRun


def _to_domain(row: Any) -> StandingApproval:
    return StandingApproval(standing_id=row.standing_id, giver=row.giver, roles=tuple(row.roles),
                            session_id=row.session_id, tool=row.tool, max_amount_minor=row.max_amount_minor,
                            until=row.until, created_at=row.created_at, revoked_at=row.revoked_at)


async def get(conn: AsyncConnection, standing_id: str, *, lock: bool = False) -> StandingApproval | None:
    stmt = select(table).where(table.c.standing_id == standing_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await conn.execute(stmt)).first()
    return _to_domain(row) if row is not None else None


async def add(conn: AsyncConnection, standing: StandingApproval) -> bool:
    """Store a new standing approval; False if one with its id exists (a redelivered give)."""
    stmt = (insert(table).values(
        standing_id=standing.standing_id, giver=standing.giver, roles=list(standing.roles),
        session_id=standing.session_id, tool=standing.tool, max_amount_minor=standing.max_amount_minor,
        until=standing.until, created_at=standing.created_at, revoked_at=standing.revoked_at)
        .on_conflict_do_nothing(index_elements=[table.c.standing_id]).returning(table.c.standing_id))
    return (await conn.execute(stmt)).first() is not None


async def save_revocation(conn: AsyncConnection, standing: StandingApproval) -> None:
    await conn.execute(table.update().where(table.c.standing_id == standing.standing_id)
                       .values(revoked_at=standing.revoked_at))


async def in_force(conn: AsyncConnection, now: datetime, *, giver: str | None = None, session_id: str | None = None,
                   tool: str | None = None, lock: bool = False) -> list[StandingApproval]:
    """In force at ``now`` (of one giver, one session and tool, or all), oldest first. ``lock``: FOR SHARE, so a
    revocation waits for the request that uses one (and then ends it)."""
    stmt = select(table).where(table.c.revoked_at.is_(None), table.c.until > now)
    for column, value in ((table.c.giver, giver), (table.c.session_id, session_id), (table.c.tool, tool)):
        if value is not None:
            stmt = stmt.where(column == value)
    stmt = stmt.order_by(table.c.created_at, table.c.standing_id)
    if lock:
        stmt = stmt.with_for_update(read=True)
    return [_to_domain(row) for row in await conn.execute(stmt)]


async def run(conn: AsyncConnection, session_id: str, run_id: str) -> StandingRun:
    """The run's row, inserted if missing, locked FOR UPDATE (a concurrent insert of the same run waits for the
    first and then finds its row)."""
    await conn.execute(insert(runs).values(session_id=session_id, run_id=run_id)
                       .on_conflict_do_nothing(index_elements=[runs.c.session_id, runs.c.run_id]))
    row = (await conn.execute(select(runs).where(runs.c.session_id == session_id, runs.c.run_id == run_id)
                              .with_for_update())).one()
    return StandingRun(session_id=row.session_id, run_id=row.run_id, approved=row.approved, ended_at=row.ended_at,
                       ended_by=row.ended_by)


async def save_run(conn: AsyncConnection, run: StandingRun) -> None:
    await conn.execute(runs.update().where(runs.c.session_id == run.session_id, runs.c.run_id == run.run_id)
                       .values(approved=run.approved, ended_at=run.ended_at, ended_by=run.ended_by))
