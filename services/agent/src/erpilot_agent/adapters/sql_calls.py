"""The calls and sessions repositories on PostgreSQL (``service_layer.ports``), on one unit of work's connection.

Every statement is a round trip, so the unit of work keeps what it learnt under a session's row lock (its
``last_seq``, read with the locked call or session): the events it appends then need no statement of their own
to number them, and a call's change and its events are one statement. Event rows and their outbox rows are
written here (``statements``), and the unit of work is told (``wrote_outbox``) so the relay is woken after
the commit.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, exists, func, select, update

from erpilot_agent.adapters import calls, statements
from erpilot_agent.adapters.tables import LEFT_BY_THEIR_REQUEST, session_events, sessions, tool_calls
from erpilot_agent.domain.tool_calls import SessionEvent, ToolCall
from erpilot_agent.service_layer.ports import CallRecord, SessionRecord, StoredEvent
from erpilot_platform.uow import Transaction

UNDECIDED = ("preparing", "awaiting_approval")
# session id -> its last_seq, read under the session's row lock taken by this transaction
LockedSeqs = dict[str, int]


def _record(row: Any) -> CallRecord:
    return CallRecord(
        call_key=row.call_key, call_id=row.call_id, session_id=row.session_id, run_id=row.run_id,
        source=row.source, operation_id=row.operation_id, request_hash=row.request_hash, assertion=row.assertion,
        created_at=row.created_at, updated_at=row.updated_at, call=calls.to_domain(row))


def _session(row: Any) -> SessionRecord:
    return SessionRecord(session_id=row.session_id, owner=row.owner, title=row.title, created_at=row.created_at,
                         last_seq=row.last_seq, active_run_id=row.active_run_id)


class SqlCallRepository:
    def __init__(self, tx: Transaction, locked_seqs: LockedSeqs):
        self.tx = tx
        self.conn = tx.conn
        self.locked_seqs = locked_seqs
        self.sessions_of: dict[str, str] = {}  # call key -> session id, of the calls locked by this transaction

    def _locked(self, row: Any) -> CallRecord:
        self.locked_seqs[row.session_id] = row.last_seq
        self.sessions_of[row.call_key] = row.session_id
        return _record(row)

    async def get(self, call_key: str, *, lock: bool = False) -> CallRecord | None:
        if lock:
            self.tx.require_writable()  # a lock without a transaction is released at once
        row = await statements.get_tool_call(self.conn, call_key, lock=lock)
        if row is None:
            return None
        return self._locked(row) if lock else _record(row)

    async def add(self, *, call_key: str, call_id: str, session_id: str, run_id: str | None, source: str,
                  request_hash: str, operation_id: str, assertion: str | None, call: ToolCall) -> CallRecord | None:
        self.tx.require_writable()
        row = await statements.insert_tool_call(
            self.conn, call_key=call_key, call_id=call_id, session_id=session_id, run_id=run_id, source=source,
            tool=call.tool, request_hash=request_hash, operation_id=operation_id, assertion=assertion,
            **calls.to_columns(call))
        return self._locked(row) if row is not None else None

    async def save(self, call_key: str, call: ToolCall, *, events: list[SessionEvent] = (),
                   operation_id: str | None = None) -> CallRecord:
        self.tx.require_writable()
        values = {**calls.to_columns(call), **({"operation_id": operation_id} if operation_id else {})}
        session_id = self.sessions_of.get(call_key)
        if events and session_id in self.locked_seqs:  # numbered under the lock: the call and its events at once
            row = await statements.update_tool_call(
                self.conn, call_key, outbox=self.tx.outbox, events=[(e.type, e.data) for e in events],
                session=(session_id, self.locked_seqs[session_id]), **values)
            self.locked_seqs[session_id] += len(events)
            self.tx.wrote_outbox()
            return _record(row)
        record = _record(await statements.update_tool_call(self.conn, call_key, **values))
        if events:
            await SqlSessionRepository(self.tx, self.locked_seqs).append(record.session_id, list(events))
        return record

    async def of_session(self, session_id: str, call_ids: list[str]) -> list[CallRecord]:
        if not call_ids:
            return []
        rows = (await self.conn.execute(select(tool_calls).where(
            tool_calls.c.session_id == session_id, tool_calls.c.call_id.in_(call_ids)))).all()
        return [_record(row) for row in rows]

    async def in_session(self, session_id: str) -> list[CallRecord]:
        return [_record(row) for row in await statements.session_tool_calls(self.conn, session_id)]

    async def undecided_in_run(self, session_id: str, run_id: str) -> list[CallRecord]:
        rows = (await self.conn.execute(select(tool_calls).where(
            tool_calls.c.session_id == session_id, tool_calls.c.run_id == run_id,
            tool_calls.c.status.in_(UNDECIDED)).order_by(tool_calls.c.created_at))).all()
        return [_record(row) for row in rows]

    async def left_by_their_request(self, *, untouched_for_seconds: float = 0.0) -> list[CallRecord]:
        rows = (await self.conn.execute(left_by_their_request(untouched_for_seconds))).all()
        return [_record(row) for row in rows]


def left_by_their_request(untouched_for_seconds: float) -> Select:
    """External calls not driven yet and untouched that long, oldest first: the predicate of the partial index
    ``tool_calls_left_by_request`` (``tables.LEFT_BY_THEIR_REQUEST``), so the pass reads that index alone."""
    return select(tool_calls).where(
        LEFT_BY_THEIR_REQUEST, tool_calls.c.updated_at <= func.now() - timedelta(seconds=untouched_for_seconds),
    ).order_by(tool_calls.c.created_at)


class SqlSessionRepository:
    def __init__(self, tx: Transaction, locked_seqs: LockedSeqs):
        self.tx = tx
        self.conn = tx.conn
        self.locked_seqs = locked_seqs

    async def get(self, session_id: str, *, lock: bool = False) -> SessionRecord | None:
        if lock:
            self.tx.require_writable()
        row = await statements.get_session(self.conn, session_id, lock=lock)
        if row is None:
            return None
        if lock:
            self.locked_seqs[session_id] = row.last_seq
        return _session(row)

    async def add(self, session_id: str, owner: str, title: str | None) -> None:
        self.tx.require_writable()
        await statements.create_session(self.conn, session_id, owner, title)

    async def owned_by(self, owner: str, *, q: str | None, before: tuple[datetime, str] | None,
                       limit: int) -> list[SessionRecord]:
        rows = await statements.owner_sessions(self.conn, owner, q=q, before=before, limit=limit)
        return [_session(row) for row in rows]

    async def events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[StoredEvent]:
        return [StoredEvent(seq=e.seq, type=e.type, data=e.data, occurred_at=e.occurred_at)
                for e in await statements.list_events(self.conn, session_id, after_seq, limit)]

    async def shows(self, session_id: str, type_: str, **data: str) -> bool:
        return bool(await self.conn.scalar(select(exists().where(
            session_events.c.session_id == session_id, session_events.c.type == type_,
            *(session_events.c.data[key].as_string() == value for key, value in data.items())))))

    async def append(self, session_id: str, events: list[SessionEvent]) -> None:
        self.tx.require_writable()
        seqs = await statements.append_events(self.conn, self.tx.outbox, session_id,
                                              [(e.type, e.data) for e in events],
                                              last_seq=self.locked_seqs.get(session_id))
        if seqs:
            self.locked_seqs[session_id] = seqs[-1]  # the row lock is ours now in any case
            self.tx.wrote_outbox()

    async def set_active_run(self, session_id: str, run_id: str | None, *, if_active: str | None = None) -> None:
        self.tx.require_writable()
        stmt = update(sessions).where(sessions.c.session_id == session_id)
        if if_active is not None:
            stmt = stmt.where(sessions.c.active_run_id == if_active)
        await self.conn.execute(stmt.values(active_run_id=run_id))
