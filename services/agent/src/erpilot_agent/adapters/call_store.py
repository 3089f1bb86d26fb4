"""The tool-call unit of work in PostgreSQL (the ``CallUnitOfWork`` of ``service_layer.call_ports``),
with the sessions' repository (``service_layer.session_ports``).

One unit of work is one connection and one transaction: ``commit`` commits it and wakes the outbox
relay; leaving the block without it rolls back (and releases the row locks ``get(lock=True)`` took).
Every statement is a round trip, so the unit of work keeps what it learnt under a session's row lock
(the session's ``last_seq``, read with the locked call): the events it emits then need no statement of
their own to number them. A read-only unit of work (``read_only=True``) opens no transaction at all:
under READ COMMITTED every statement has its own snapshot anyway, so BEGIN and ROLLBACK bought nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_agent.adapters import calls, repository
from erpilot_agent.adapters.tables import session_events, tool_calls
from erpilot_agent.domain.tool_calls import SessionEvent, ToolCall
from erpilot_agent.service_layer.call_ports import CallRecord
from erpilot_agent.service_layer.session_ports import RunSummary, SessionRecord, StoredEvent


def _record(row: Any) -> CallRecord:
    return CallRecord(
        call_key=row.call_key, call_id=row.call_id, session_id=row.session_id, run_id=row.run_id,
        source=row.source, operation_id=row.operation_id, request_hash=row.request_hash, grant=row.grant,
        created_at=row.created_at, updated_at=row.updated_at, call=calls.to_domain(row))


class SqlCallRepository:
    def __init__(self, conn: AsyncConnection, locked_seqs: dict[str, int], writable: Callable[[], None],
                 emit: Callable[[str, list[SessionEvent]], Awaitable[None]]):
        self.conn = conn
        self.locked_seqs = locked_seqs  # session id -> its last_seq, the session row locked by this transaction
        self.sessions_of: dict[str, str] = {}  # call key -> session id, of the calls locked by this transaction
        self.writable = writable  # raises in a read-only unit of work
        self.emit = emit

    def _locked(self, row: Any) -> CallRecord:
        self.locked_seqs[row.session_id] = row.last_seq
        self.sessions_of[row.call_key] = row.session_id
        return _record(row)

    async def get(self, call_key: str, *, lock: bool = False) -> CallRecord | None:
        if lock:
            self.writable()  # a lock without a transaction is released at once
        row = await repository.get_tool_call(self.conn, call_key, lock=lock)
        if row is None:
            return None
        return self._locked(row) if lock else _record(row)

    async def add(self, *, call_key: str, call_id: str, session_id: str, run_id: str | None, source: str,
                  request_hash: str, operation_id: str, call: ToolCall) -> CallRecord | None:
        self.writable()
        row = await repository.insert_tool_call(
            self.conn, call_key=call_key, call_id=call_id, session_id=session_id, run_id=run_id, source=source,
            tool=call.tool, request_hash=request_hash, operation_id=operation_id, **calls.to_columns(call))
        return self._locked(row) if row is not None else None

    async def save(self, call_key: str, call: ToolCall, *, events: list[SessionEvent] = (), commit_sent: bool = False,
                   **columns: Any) -> CallRecord:
        self.writable()
        values = {**calls.to_columns(call), **columns}
        if commit_sent:
            values["commit_sent_at"] = repository.now()
        session_id = self.sessions_of.get(call_key)
        if events and session_id in self.locked_seqs:  # numbered under the lock: the call and its events at once
            row = await repository.update_tool_call(self.conn, call_key, events=[(e.type, e.data) for e in events],
                                                    session=(session_id, self.locked_seqs[session_id]), **values)
            self.locked_seqs[session_id] += len(events)
            return _record(row)
        record = _record(await repository.update_tool_call(self.conn, call_key, **values))
        await self.emit(record.session_id, events)
        return record

    async def of_session(self, session_id: str, call_ids: list[str]) -> list[CallRecord]:
        if not call_ids:
            return []
        rows = (await self.conn.execute(select(tool_calls).where(
            tool_calls.c.session_id == session_id, tool_calls.c.call_id.in_(call_ids)))).all()
        return [_record(row) for row in rows]

    async def in_session(self, session_id: str) -> list[CallRecord]:
        return [_record(row) for row in await repository.session_tool_calls(self.conn, session_id)]

    async def stuck(self, states: tuple[str, ...], older_than: timedelta) -> list[CallRecord]:
        cutoff = repository.now() - older_than
        return [_record(row) for state in states for row in await repository.calls_in_status(self.conn, state, cutoff)]


def _session(row: Any) -> SessionRecord:
    return SessionRecord(session_id=row.session_id, owner=row.owner, title=row.title, created_at=row.created_at,
                         last_seq=row.last_seq, active_run_id=row.active_run_id)


class SqlSessionRepository:
    def __init__(self, conn: AsyncConnection):
        self.conn = conn

    async def get(self, session_id: str) -> SessionRecord | None:
        row = await repository.get_session(self.conn, session_id)
        return _session(row) if row is not None else None

    async def add(self, session_id: str, owner: str, title: str | None) -> None:
        await repository.create_session(self.conn, session_id, owner, title)

    async def owned_by(self, owner: str, *, q: str | None, before: tuple[datetime, str] | None,
                       limit: int) -> list[SessionRecord]:
        rows = await repository.owner_sessions(self.conn, owner, q=q, before=before, limit=limit)
        return [_session(row) for row in rows]

    async def runs(self, session_id: str) -> list[RunSummary]:
        return [RunSummary(run_id=r.run_id, status=r.status, error=r.error, created_at=r.created_at)
                for r in await repository.session_runs(self.conn, session_id)]

    async def events(self, session_id: str) -> list[StoredEvent]:
        return [StoredEvent(seq=e.seq, type=e.type, data=e.data)
                for e in await repository.list_events(self.conn, session_id)]

    async def shows(self, session_id: str, type_: str, **data: str) -> bool:
        return bool(await self.conn.scalar(select(exists().where(
            session_events.c.session_id == session_id, session_events.c.type == type_,
            *(session_events.c.data[key].as_string() == value for key, value in data.items())))))


class SqlCallUnitOfWork:
    def __init__(self, engine: AsyncEngine, *, read_only: bool = False):
        self.engine = engine
        self.read_only = read_only

    async def __aenter__(self) -> SqlCallUnitOfWork:
        self.conn = await self.engine.connect()
        if self.read_only:  # each statement on its own: no BEGIN, no ROLLBACK round trip
            await self.conn.execution_options(isolation_level="AUTOCOMMIT")
        self.locked_seqs: dict[str, int] = {}
        self.calls = SqlCallRepository(self.conn, self.locked_seqs, self._writable, self.emit)
        self.sessions = SqlSessionRepository(self.conn)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.conn.close()  # rolls back whatever was not committed

    async def owner_of(self, session_id: str) -> str | None:
        session = await repository.get_session(self.conn, session_id)
        return session.owner if session is not None else None

    async def emit(self, session_id: str, events: list[SessionEvent]) -> None:
        self._writable()
        seqs = await repository.append_events(self.conn, session_id, [(e.type, e.data) for e in events],
                                              last_seq=self.locked_seqs.get(session_id))
        if seqs:
            self.locked_seqs[session_id] = seqs[-1]  # the row lock is ours now in any case

    async def commit(self) -> None:
        self._writable()
        await self.conn.commit()
        self.locked_seqs.clear()  # the commit released the locks
        repository.outbox.wake()

    def _writable(self) -> None:
        if self.read_only:  # each statement would commit on its own: not a unit of work
            raise RuntimeError("a read-only unit of work writes nothing")
