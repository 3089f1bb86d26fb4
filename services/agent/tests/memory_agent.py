"""The agent's persistence in memory, for the tests: its ``Work`` on ``erpilot_platform.testing.memory_uow``
(``MemoryUnitOfWork``: deep-copied state committed when the work returns, a settable clock) and the run drivers'
locks. The ERP's fake is ``fakes.py``.

The repositories mirror the SQL ones (``adapters.sql_calls``, ``sql_runs``): the same cases run against both
(``repository_cases``). Session events are numbered per session and each is emitted on the session's subject
with ``Nats-Msg-Id`` ``session:<sid>:<seq>``, as the SQL repository writes its outbox rows.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from erpilot_agent.domain.run_sharing import BLOCKING_RUN_STATES
from erpilot_agent.domain.run_state import BLOCKING_CALL_STATES, Run
from erpilot_agent.domain.runs import StoredEntry
from erpilot_agent.domain.tool_calls import SessionEvent, ToolCall
from erpilot_agent.service_layer.ports import CallRecord, SessionRecord, StoredEvent
from erpilot_contracts.sessions.v1 import SessionEventV1
from erpilot_contracts.subjects import session_events_subject
from erpilot_platform.testing.memory_uow import MemoryTransaction, MemoryUnitOfWork

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@dataclass
class AgentState:
    """What the agent's database holds (the memory unit of work deep-copies it per unit of work)."""

    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    events: list[tuple[str, StoredEvent]] = field(default_factory=list)  # (session_id, event), in append order
    calls: dict[str, CallRecord] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    history: dict[str, list[StoredEntry]] = field(default_factory=dict)


class MemoryCallRepository:
    def __init__(self, tx: MemoryTransaction[AgentState], sessions: MemorySessionRepository):
        self.tx, self.state, self.sessions = tx, tx.state, sessions

    async def get(self, call_key: str, *, lock: bool = False) -> CallRecord | None:
        if lock:
            self.tx.require_writable()
        return copy.deepcopy(self.state.calls.get(call_key))

    async def add(self, *, call_key: str, call_id: str, session_id: str, run_id: str | None, source: str,
                  request_hash: str, operation_id: str, assertion: str | None, call: ToolCall) -> CallRecord | None:
        self.tx.require_writable()
        if session_id not in self.state.sessions:
            raise LookupError(f"no session {session_id}")  # the SQL foreign key
        if call_key in self.state.calls:
            return None
        now = self.tx.clock()
        self.state.calls[call_key] = CallRecord(call_key, call_id, session_id, run_id, source, operation_id,
                                                request_hash, assertion, now, now, copy.deepcopy(call))
        return copy.deepcopy(self.state.calls[call_key])

    async def save(self, call_key: str, call: ToolCall, *, events: list[SessionEvent] = (),
                   operation_id: str | None = None) -> CallRecord:
        self.tx.require_writable()
        record = self.state.calls[call_key]
        self.state.calls[call_key] = replace(record, call=copy.deepcopy(call), updated_at=self.tx.clock(),
                                             operation_id=operation_id or record.operation_id)
        await self.sessions.append(record.session_id, list(events))
        return copy.deepcopy(self.state.calls[call_key])

    async def of_session(self, session_id: str, call_ids: list[str]) -> list[CallRecord]:
        return [copy.deepcopy(r) for r in self.state.calls.values()
                if r.session_id == session_id and r.call_id in call_ids]

    async def in_session(self, session_id: str) -> list[CallRecord]:
        return sorted((copy.deepcopy(r) for r in self.state.calls.values() if r.session_id == session_id),
                      key=lambda r: r.created_at)

    async def undecided_in_run(self, session_id: str, run_id: str) -> list[CallRecord]:
        return [r for r in await self.in_session(session_id)
                if r.run_id == run_id and r.call.state.value in ("preparing", "awaiting_approval")]

    async def left_by_their_request(self, *, untouched_for_seconds: float = 0.0) -> list[CallRecord]:
        latest = self.tx.clock() - timedelta(seconds=untouched_for_seconds)
        return sorted((copy.deepcopy(r) for r in self.state.calls.values()
                       if r.source == "external" and r.call.state.value in ("running", "preparing")
                       and r.updated_at <= latest), key=lambda r: r.created_at)


class MemorySessionRepository:
    def __init__(self, tx: MemoryTransaction[AgentState]):
        self.tx, self.state = tx, tx.state

    async def get(self, session_id: str, *, lock: bool = False) -> SessionRecord | None:
        if lock:
            self.tx.require_writable()
        return copy.deepcopy(self.state.sessions.get(session_id))

    async def add(self, session_id: str, owner: str, title: str | None) -> None:
        self.tx.require_writable()
        if session_id in self.state.sessions:
            return  # the SQL insert's ON CONFLICT DO NOTHING
        self.state.sessions[session_id] = SessionRecord(session_id, owner, title, self.tx.clock(), 0, None)

    async def owned_by(self, owner: str, *, q: str | None, before: tuple[datetime, str] | None,
                       limit: int) -> list[SessionRecord]:
        mine = [s for s in self.state.sessions.values() if s.owner == owner]
        mine = [s for s in mine if not q or q.lower() in (s.title or "").lower()]
        mine = [s for s in mine if before is None or (s.created_at, s.session_id) < before]
        return copy.deepcopy(sorted(mine, key=lambda s: (s.created_at, s.session_id), reverse=True)[:limit])

    async def events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[StoredEvent]:
        mine = [copy.deepcopy(e) for sid, e in self.state.events if sid == session_id and e.seq > after_seq]
        return mine[:limit]

    async def shows(self, session_id: str, type_: str, **data: str) -> bool:
        return any(e.type == type_ and all(e.data.get(k) == v for k, v in data.items())
                   for e in await self.events(session_id))

    async def append(self, session_id: str, events: list[SessionEvent]) -> None:
        if not events:
            return
        self.tx.require_writable()
        session = self.state.sessions[session_id]
        occurred_at = self.tx.clock()
        for event in events:
            session.last_seq += 1
            self.state.events.append((session_id, StoredEvent(session.last_seq, event.type, copy.deepcopy(event.data),
                                                                  occurred_at)))
            await self.tx.emit(session_events_subject(session_id), SessionEventV1(
                seq=session.last_seq, type=event.type, session_id=session_id, occurred_at=occurred_at,
                data=event.data), msg_id=f"session:{session_id}:{session.last_seq}")

    async def set_active_run(self, session_id: str, run_id: str | None, *, if_active: str | None = None) -> None:
        self.tx.require_writable()
        session = self.state.sessions[session_id]
        if if_active is None or session.active_run_id == if_active:
            session.active_run_id = run_id


class MemoryRunRepository:
    def __init__(self, tx: MemoryTransaction[AgentState]):
        self.tx, self.state = tx, tx.state

    def _out(self, run: Run) -> Run:
        return replace(copy.deepcopy(run), owner=self.state.sessions[run.session_id].owner)

    def _newest(self, *runs: Run) -> Run | None:
        return self._out(max(runs, key=lambda r: r.created_at)) if runs else None

    async def get(self, run_id: str) -> Run | None:
        run = self.state.runs.get(run_id)
        return self._out(run) if run is not None else None

    async def by_message(self, session_id: str, message_id: str) -> Run | None:
        return self._newest(*(r for r in self.state.runs.values()
                              if r.session_id == session_id and r.message_id == message_id))

    async def working(self, session_id: str) -> Run | None:
        return self._newest(*(r for r in self.state.runs.values()
                              if r.session_id == session_id and r.status in BLOCKING_RUN_STATES))

    async def of_session(self, session_id: str) -> list[Run]:
        return [self._out(r) for r in sorted(self.state.runs.values(), key=lambda r: r.created_at)
                if r.session_id == session_id]

    async def add(self, run: Run) -> None:
        self.tx.require_writable()
        if run.run_id in self.state.runs or any(
                r.session_id == run.session_id and r.message_id == run.message_id for r in self.state.runs.values()):
            raise KeyError(f"run {run.run_id} or its message exists")  # the SQL unique constraints
        now = self.tx.clock()
        self.state.runs[run.run_id] = replace(copy.deepcopy(run), created_at=now, updated_at=now)

    async def save(self, run: Run) -> None:
        self.tx.require_writable()
        stored = self.state.runs[run.run_id]
        self.state.runs[run.run_id] = replace(
            stored, status=run.status, error=copy.deepcopy(run.error), steps=run.steps,
            failed_attempts=run.failed_attempts, failing_since=run.failing_since,
            updated_at=run.updated_at or stored.updated_at)

    async def history(self, session_id: str) -> list[StoredEntry]:
        return copy.deepcopy(self.state.history.get(session_id, []))

    async def append_history(self, session_id: str, run_id: str, entries: list[dict[str, Any]]) -> None:
        if entries:
            self.tx.require_writable()
            self.state.history.setdefault(session_id, []).extend(
                StoredEntry(run_id, copy.deepcopy(entry)) for entry in entries)

    def _blocked(self, run_id: str) -> bool:
        return any(c.run_id == run_id and c.call.state.value in BLOCKING_CALL_STATES
                   for c in self.state.calls.values())

    async def resumable(self, run_id: str) -> bool:
        run = self.state.runs.get(run_id)
        return run is not None and run.status == "waiting" and not self._blocked(run.run_id)

    async def due(self, *, now: datetime, stale_seconds: float, max_delay_seconds: float) -> list[str]:
        def is_due(run: Run) -> bool:
            since_last = (now - run.updated_at).total_seconds()
            delay = min(stale_seconds * 2 ** max(run.failed_attempts - 1, 0), max_delay_seconds)
            backed_off = run.failed_attempts == 0 or since_last >= delay
            if run.status == "running":
                return since_last >= stale_seconds and backed_off
            return run.status == "waiting" and not self._blocked(run.run_id) and backed_off

        return [r.run_id for r in sorted(self.state.runs.values(), key=lambda r: r.updated_at) if is_due(r)][:100]

    async def any_running(self) -> bool:
        return any(r.status == "running" for r in self.state.runs.values())


class MemoryWork:
    def __init__(self, tx: MemoryTransaction[AgentState]):
        self.tx = tx
        self.sessions = MemorySessionRepository(tx)
        self.calls = MemoryCallRepository(tx, self.sessions)
        self.runs = MemoryRunRepository(tx)

    async def emit(self, subject: str, payload: BaseModel | dict[str, Any], msg_id: str | None = None) -> None:
        await self.tx.emit(subject, payload, msg_id=msg_id)


class MemoryAgent(MemoryUnitOfWork[AgentState, MemoryWork]):
    """The agent's unit of work in memory, with what the tests look at."""

    def __init__(self, sessions: dict[str, str] | None = None, *, now: datetime = START):
        super().__init__(AgentState(), MemoryWork, now=now)
        for session_id, owner in (sessions or {}).items():
            self.state.sessions[session_id] = SessionRecord(session_id, owner, None, now, 0, None)
        self.units = 0  # units of work begun (each a transaction in SQL, or a read)

    async def run(self, work):
        self.units += 1
        return await super().run(work)

    async def read(self, work):
        self.units += 1
        return await super().read(work)

    def event_types(self, session_id: str) -> list[str]:
        return [e.type for sid, e in self.state.events if sid == session_id]

    def events_of(self, session_id: str, type_: str) -> list[dict[str, Any]]:
        return [e.data for sid, e in self.state.events if sid == session_id and e.type == type_]

    def call(self, call_key: str) -> CallRecord:
        return self.state.calls[call_key]


class MemoryDriverLocks:
    """The run drivers' exclusive right per session (``adapters.driver_locks`` in SQL)."""

    def __init__(self) -> None:
        self.held: set[str] = set()

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[bool]:
        if session_id in self.held:
            yield False
            return
        self.held.add(session_id)
        try:
            yield True
        finally:
            self.held.discard(session_id)
