"""The tool-call unit of work in memory (the ``CallUnitOfWork`` of ``service_layer.call_ports``), for
unit tests and anything else that needs the pipeline without a database.

``MemoryCallStore`` is what is committed. A unit of work stages its writes and events and makes them
visible only on ``commit``; leaving without it drops them, as the SQL rollback does. Records are
copied in and out, so a caller never changes the store by changing what it got. Sessions are given as
``{session_id: owner}`` (or added by the unit of work); runs, which the run store owns, are set in
``runs`` by a test that needs them.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from erpilot_agent.domain.tool_calls import SessionEvent, ToolCall
from erpilot_agent.service_layer.call_ports import CallRecord
from erpilot_agent.service_layer.session_ports import RunSummary, SessionRecord, StoredEvent


class MemoryCallStore:
    def __init__(self, sessions: dict[str, str] | None = None) -> None:
        self.sessions: dict[str, SessionRecord] = {
            sid: SessionRecord(sid, owner, None, datetime.now(UTC), 0, None) for sid, owner in (sessions or {}).items()}
        self.runs: dict[str, list[RunSummary]] = {}  # session_id -> its runs, oldest first
        self.rows: dict[str, CallRecord] = {}
        self.events: list[tuple[str, str, dict[str, Any]]] = []  # (session_id, type, data), committed
        self.commit_sent: set[str] = set()  # call keys whose commit went out
        self.units = 0  # units of work begun (each a transaction in SQL)
        self.commits = 0  # units of work committed

    def event_types(self, session_id: str) -> list[str]:
        return [type_ for sid, type_, _ in self.events if sid == session_id]

    def unit_of_work(self, *, read_only: bool = False) -> MemoryCallUnitOfWork:
        return MemoryCallUnitOfWork(self, read_only=read_only)


class MemoryCallRepository:
    def __init__(self, store: MemoryCallStore, staged: dict[str, CallRecord], sent: set[str],
                 writable: Callable[[], None], emit: Callable[[str, list[SessionEvent]], Awaitable[None]]):
        self.store, self.staged, self.sent, self.writable, self.emit = store, staged, sent, writable, emit

    def _current(self, call_key: str) -> CallRecord | None:
        return self.staged.get(call_key) or self.store.rows.get(call_key)

    async def get(self, call_key: str, *, lock: bool = False) -> CallRecord | None:
        if lock:
            self.writable()
        return copy.deepcopy(self._current(call_key))

    async def add(self, *, call_key: str, call_id: str, session_id: str, run_id: str | None, source: str,
                  request_hash: str, operation_id: str, call: ToolCall) -> CallRecord | None:
        self.writable()
        if self._current(call_key) is not None:
            return None
        now = datetime.now(UTC)
        self.staged[call_key] = CallRecord(call_key, call_id, session_id, run_id, source, operation_id,
                                           request_hash, None, now, now, copy.deepcopy(call))
        return copy.deepcopy(self.staged[call_key])

    async def save(self, call_key: str, call: ToolCall, *, events: list[SessionEvent] = (), commit_sent: bool = False,
                   **columns: Any) -> CallRecord:
        self.writable()
        record = copy.deepcopy(self._current(call_key))
        record.call = copy.deepcopy(call)
        if "arguments" in columns:  # an edit: the stored arguments are the call's from now on
            record.call.arguments = columns.pop("arguments")
        self.staged[call_key] = replace(record, updated_at=datetime.now(UTC), **columns)
        if commit_sent:
            self.sent.add(call_key)
        await self.emit(record.session_id, list(events))
        return copy.deepcopy(self.staged[call_key])

    async def of_session(self, session_id: str, call_ids: list[str]) -> list[CallRecord]:
        return [copy.deepcopy(r) for r in self.store.rows.values()
                if r.session_id == session_id and r.call_id in call_ids]

    async def in_session(self, session_id: str) -> list[CallRecord]:
        return sorted((copy.deepcopy(r) for r in {**self.store.rows, **self.staged}.values()
                       if r.session_id == session_id), key=lambda r: r.created_at)

    async def stuck(self, states: tuple[str, ...], older_than: timedelta) -> list[CallRecord]:
        cutoff = datetime.now(UTC) - older_than
        return [copy.deepcopy(r) for r in sorted(self.store.rows.values(), key=lambda r: r.updated_at)
                if r.call.state.value in states and r.updated_at <= cutoff]


class MemorySessionRepository:
    def __init__(self, store: MemoryCallStore, unit: MemoryCallUnitOfWork):
        self.store, self.unit = store, unit

    def _events(self, session_id: str) -> list[StoredEvent]:
        visible = self.store.events + self.unit.events  # the SQL transaction sees its own writes too
        mine = [(type_, data) for sid, type_, data in visible if sid == session_id]
        return [StoredEvent(seq, type_, copy.deepcopy(data)) for seq, (type_, data) in enumerate(mine, start=1)]

    def _current(self, session_id: str) -> SessionRecord | None:
        record = self.unit.new_sessions.get(session_id) or self.store.sessions.get(session_id)
        return replace(record, last_seq=len(self._events(session_id))) if record is not None else None

    async def get(self, session_id: str) -> SessionRecord | None:
        return self._current(session_id)

    async def add(self, session_id: str, owner: str, title: str | None) -> None:
        self.unit.new_sessions[session_id] = SessionRecord(session_id, owner, title, datetime.now(UTC), 0, None)

    async def owned_by(self, owner: str, *, q: str | None, before: tuple[datetime, str] | None,
                       limit: int) -> list[SessionRecord]:
        mine = [self._current(sid) for sid, s in self.store.sessions.items() if s.owner == owner]
        mine = [s for s in mine if not q or q.lower() in (s.title or "").lower()]
        mine = [s for s in mine if before is None or (s.created_at, s.session_id) < before]
        return sorted(mine, key=lambda s: (s.created_at, s.session_id), reverse=True)[:limit]

    async def runs(self, session_id: str) -> list[RunSummary]:
        return copy.deepcopy(self.store.runs.get(session_id, []))

    async def events(self, session_id: str) -> list[StoredEvent]:
        return self._events(session_id)

    async def shows(self, session_id: str, type_: str, **data: str) -> bool:
        return any(e.type == type_ and all(e.data.get(k) == v for k, v in data.items())
                   for e in self._events(session_id))


class MemoryCallUnitOfWork:
    def __init__(self, store: MemoryCallStore, *, read_only: bool = False):
        self.store = store
        self.read_only = read_only

    async def __aenter__(self) -> MemoryCallUnitOfWork:
        self.store.units += 1
        self.staged: dict[str, CallRecord] = {}
        self.sent: set[str] = set()
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.new_sessions: dict[str, SessionRecord] = {}
        self.calls = MemoryCallRepository(self.store, self.staged, self.sent, self._writable, self.emit)
        self.sessions = MemorySessionRepository(self.store, self)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.staged.clear()
        self.events = []
        self.new_sessions = {}

    async def owner_of(self, session_id: str) -> str | None:
        session = self.store.sessions.get(session_id)
        return session.owner if session is not None else None

    async def emit(self, session_id: str, events: list[SessionEvent]) -> None:
        self._writable()
        self.events += [(session_id, e.type, copy.deepcopy(e.data)) for e in events]

    def _writable(self) -> None:
        if self.read_only:  # as the SQL one: its statements would not be one unit of work
            raise RuntimeError("a read-only unit of work writes nothing")

    async def commit(self) -> None:
        self._writable()
        self.store.rows.update(self.staged)
        self.store.events += self.events
        self.store.commit_sent |= self.sent
        self.store.sessions.update(self.new_sessions)
        self.store.commits += 1
        self.staged.clear()
        self.events = []
        self.new_sessions = {}
