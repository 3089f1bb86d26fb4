"""The runs repository on PostgreSQL (``service_layer.ports.RunRepository``): the ``runs`` rows and the model's
``history``, on one unit of work's connection. The rules (who may start, cancel or end a run, and what each
step records) are the service layer's (``service_layer.run_records``); this only reads and writes rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, and_, exists, func, literal, select, update

from erpilot_agent.adapters.tables import history, runs, sessions, tool_calls
from erpilot_agent.domain.run_sharing import BLOCKING_RUN_STATES
from erpilot_agent.domain.run_state import BLOCKING_CALL_STATES, Run
from erpilot_agent.domain.runs import StoredEntry
from erpilot_platform.uow import Transaction

_RUN = select(runs, sessions.c.owner).join(sessions, sessions.c.session_id == runs.c.session_id)


def _run(row: Any) -> Run:
    return Run(run_id=row.run_id, session_id=row.session_id, owner=row.owner, status=row.status,
               message_id=row.message_id, steps=row.steps, error=row.error, failed_attempts=row.failed_attempts,
               failing_since=row.failing_since, assertion=row.assertion, created_at=row.created_at,
               updated_at=row.updated_at)


def _blocked(run_id_column: Any) -> Any:
    return exists().where(tool_calls.c.run_id == run_id_column, tool_calls.c.status.in_(BLOCKING_CALL_STATES))


class SqlRunRepository:
    def __init__(self, tx: Transaction):
        self.tx = tx
        self.conn = tx.conn

    async def _one(self, *where: Any) -> Run | None:
        row = (await self.conn.execute(_RUN.where(*where).order_by(runs.c.created_at.desc()).limit(1))).first()
        return _run(row) if row is not None else None

    async def get(self, run_id: str) -> Run | None:
        return await self._one(runs.c.run_id == run_id)

    async def by_message(self, session_id: str, message_id: str) -> Run | None:
        return await self._one(runs.c.session_id == session_id, runs.c.message_id == message_id)

    async def working(self, session_id: str) -> Run | None:
        return await self._one(runs.c.session_id == session_id, runs.c.status.in_(BLOCKING_RUN_STATES))

    async def of_session(self, session_id: str) -> list[Run]:
        rows = (await self.conn.execute(_RUN.where(runs.c.session_id == session_id)
                                        .order_by(runs.c.created_at))).all()
        return [_run(row) for row in rows]

    async def add(self, run: Run) -> None:
        self.tx.require_writable()
        await self.conn.execute(runs.insert().values(
            run_id=run.run_id, session_id=run.session_id, status=run.status, message_id=run.message_id,
            assertion=run.assertion))

    async def save(self, run: Run) -> None:
        self.tx.require_writable()
        await self.conn.execute(update(runs).where(runs.c.run_id == run.run_id).values(
            status=run.status, error=run.error, steps=run.steps, failed_attempts=run.failed_attempts,
            failing_since=run.failing_since, **({"updated_at": run.updated_at} if run.updated_at else {})))

    async def history(self, session_id: str) -> list[StoredEntry]:
        rows = (await self.conn.execute(select(history.c.run_id, history.c.entry).where(
            history.c.session_id == session_id).order_by(history.c.position))).all()
        return [StoredEntry(row.run_id, row.entry) for row in rows]

    async def append_history(self, session_id: str, run_id: str, entries: list[dict[str, Any]]) -> None:
        if not entries:
            return
        self.tx.require_writable()
        last = await self.conn.scalar(select(func.coalesce(func.max(history.c.position), 0))
                                      .where(history.c.session_id == session_id))
        await self.conn.execute(history.insert(), [
            {"session_id": session_id, "position": last + offset, "run_id": run_id, "entry": entry}
            for offset, entry in enumerate(entries, start=1)])

    async def resumable(self, run_id: str) -> bool:
        found = await self.conn.scalar(select(runs.c.run_id).where(
            runs.c.run_id == run_id, runs.c.status == "waiting", ~_blocked(runs.c.run_id)))
        return found is not None

    async def due(self, *, now: datetime, stale_seconds: float, max_delay_seconds: float) -> list[str]:
        since_last = func.extract("epoch", literal(now, DateTime(timezone=True)) - runs.c.updated_at)
        delay = func.least(stale_seconds * func.power(2, func.greatest(runs.c.failed_attempts - 1, 0)),
                           max_delay_seconds)
        due = (runs.c.failed_attempts == 0) | (since_last >= delay)
        rows = (await self.conn.execute(select(runs.c.run_id).where(
            (and_(runs.c.status == "running", since_last >= stale_seconds, due))
            | (and_(runs.c.status == "waiting", ~_blocked(runs.c.run_id), due))
        ).order_by(runs.c.updated_at).limit(100))).scalars().all()
        return list(rows)

    async def any_running(self) -> bool:
        return bool(await self.conn.scalar(select(exists().where(runs.c.status == "running"))))
