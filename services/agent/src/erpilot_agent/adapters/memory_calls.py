"""The tool-call unit of work in memory (the ``CallUnitOfWork`` of ``service_layer.call_ports``), for
unit tests and anything else that needs the pipeline without a database.

``MemoryCallStore`` is what is committed. A unit of work stages its writes and events and makes them
visible only on ``commit``; leaving without it drops them, as the SQL rollback does. Records are
copied in and out, so a caller never changes the store by changing what it got.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from erpilot_agent.domain.tool_calls import SessionEvent, ToolCall
from erpilot_agent.service_layer.call_ports import CallRecord


class MemoryCallStore:
    def __init__(self, sessions: dict[str, str] | None = None) -> None:
        self.sessions: dict[str, str] = dict(sessions or {})  # session_id -> owner
        self.rows: dict[str, CallRecord] = {}
        self.events: list[tuple[str, str, dict[str, Any]]] = []  # (session_id, type, data), committed
        self.commit_sent: set[str] = set()  # call keys whose commit went out
        self.units = 0  # units of work begun (each a transaction in SQL)
        self.commits = 0  # units of work committed

    def event_types(self, session_id: str) -> list[str]:
        return [type_ for sid, type_, _ in self.events if sid == session_id]

    def unit_of_work(self) -> MemoryCallUnitOfWork:
        return MemoryCallUnitOfWork(self)


class MemoryCallRepository:
    def __init__(self, store: MemoryCallStore, staged: dict[str, CallRecord], sent: set[str]):
        self.store, self.staged, self.sent = store, staged, sent

    def _current(self, call_key: str) -> CallRecord | None:
        return self.staged.get(call_key) or self.store.rows.get(call_key)

    async def get(self, call_key: str, *, lock: bool = False) -> CallRecord | None:
        return copy.deepcopy(self._current(call_key))

    async def add(self, *, call_key: str, call_id: str, session_id: str, run_id: str | None, source: str,
                  request_hash: str, operation_id: str, call: ToolCall) -> CallRecord | None:
        if self._current(call_key) is not None:
            return None
        now = datetime.now(UTC)
        self.staged[call_key] = CallRecord(call_key, call_id, session_id, run_id, source, operation_id,
                                           request_hash, None, now, now, copy.deepcopy(call))
        return copy.deepcopy(self.staged[call_key])

    async def save(self, call_key: str, call: ToolCall, *, commit_sent: bool = False, **columns: Any) -> CallRecord:
        record = copy.deepcopy(self._current(call_key))
        record.call = copy.deepcopy(call)
        if "arguments" in columns:  # an edit: the stored arguments are the call's from now on
            record.call.arguments = columns.pop("arguments")
        self.staged[call_key] = replace(record, updated_at=datetime.now(UTC), **columns)
        if commit_sent:
            self.sent.add(call_key)
        return copy.deepcopy(self.staged[call_key])

    async def of_session(self, session_id: str, call_ids: list[str]) -> list[CallRecord]:
        return [copy.deepcopy(r) for r in self.store.rows.values()
                if r.session_id == session_id and r.call_id in call_ids]

    async def stuck(self, states: tuple[str, ...], older_than: timedelta) -> list[CallRecord]:
        cutoff = datetime.now(UTC) - older_than
        return [copy.deepcopy(r) for r in sorted(self.store.rows.values(), key=lambda r: r.updated_at)
                if r.call.state.value in states and r.updated_at <= cutoff]


class MemoryCallUnitOfWork:
    def __init__(self, store: MemoryCallStore):
        self.store = store

    async def __aenter__(self) -> MemoryCallUnitOfWork:
        self.store.units += 1
        self.staged: dict[str, CallRecord] = {}
        self.sent: set[str] = set()
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.calls = MemoryCallRepository(self.store, self.staged, self.sent)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.staged.clear()
        self.events = []

    async def owner_of(self, session_id: str) -> str | None:
        return self.store.sessions.get(session_id)

    async def emit(self, session_id: str, events: list[SessionEvent]) -> None:
        self.events += [(session_id, e.type, copy.deepcopy(e.data)) for e in events]

    async def commit(self) -> None:
        self.store.rows.update(self.staged)
        self.store.events += self.events
        self.store.commit_sent |= self.sent
        self.store.commits += 1
        self.staged.clear()
        self.events = []
