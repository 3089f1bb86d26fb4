"""Row-level steps on the ``runs`` and ``history`` tables that every write of ``adapters.runs`` builds on:
the session row lock first, then history appended at the next positions, a run closed with its status.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_agent.adapters import repository
from erpilot_agent.adapters.tables import history, runs, sessions, tool_calls
from erpilot_agent.domain.history import Entry
from erpilot_agent.service_layer.run_ports import ACTIVE, RunRecord

log = logging.getLogger(__name__)
# A waiting run may go on once none of its calls is still with a person or a commit.
BLOCKING_CALL_STATES = ("awaiting_approval", "approved", "executing")

# Storing a model reply or a tool result is progress: the run's failed attempts start again from zero.
PROGRESS = {"failed_attempts": 0, "failing_since": None}


def blocked(run_id_column: Any) -> Any:
    return exists().where(tool_calls.c.run_id == run_id_column, tool_calls.c.status.in_(BLOCKING_CALL_STATES))


async def run_record(conn: AsyncConnection, run_id: str) -> RunRecord | None:
    row = (await conn.execute(
        select(runs.c.run_id, runs.c.session_id, runs.c.status, runs.c.steps, sessions.c.owner)
        .join(sessions, sessions.c.session_id == runs.c.session_id).where(runs.c.run_id == run_id)
    )).first()
    if row is None:
        return None
    return RunRecord(row.run_id, row.session_id, row.owner, row.status, row.steps)


async def lock_active_run(conn: AsyncConnection, run_id: str) -> Any:
    """Lock the run's session row (history and event order), then return the run if it is still active."""
    session_id = await conn.scalar(select(runs.c.session_id).where(runs.c.run_id == run_id))
    if session_id is None:
        return None
    await repository.get_session(conn, session_id, lock=True)
    run = (await conn.execute(select(runs).where(runs.c.run_id == run_id))).first()
    if run is None or run.status not in ACTIVE:
        log.info("run %s is %s; nothing recorded", run_id, run.status if run else "gone")
        return None
    return run


async def answered_calls(conn: AsyncConnection, session_id: str) -> set[str]:
    rows = (await conn.execute(select(history.c.entry).where(history.c.session_id == session_id))).scalars()
    return {entry.get("tool_call_id") for entry in rows if entry.get("role") == "tool"}


async def append_history(conn: AsyncConnection, session_id: str, run_id: str, entries: list[Entry]) -> None:
    """Append entries at the next positions (the caller holds the session row lock)."""
    if not entries:
        return
    last = await conn.scalar(select(func.coalesce(func.max(history.c.position), 0))
                             .where(history.c.session_id == session_id))
    await conn.execute(history.insert(), [
        {"session_id": session_id, "position": last + offset, "run_id": run_id, "entry": entry}
        for offset, entry in enumerate(entries, start=1)
    ])


async def close_run(conn: AsyncConnection, session_id: str, run_id: str, status: str, error: dict | None) -> None:
    await conn.execute(update(runs).where(runs.c.run_id == run_id).values(
        status=status, error=error, updated_at=repository.now()))
    await conn.execute(update(sessions).where(sessions.c.session_id == session_id,
                                              sessions.c.active_run_id == run_id).values(active_run_id=None))
