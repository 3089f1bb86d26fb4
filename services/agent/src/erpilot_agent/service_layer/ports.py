"""What the agent's use cases need from the outside world (issue 27: one persistence shape).

``Work`` is one unit of work (``erpilot_platform.uow``): one transaction over the recorded tool calls, the
sessions with their event streams, the runs with the model's history, and the outbox (``emit``). A use case
changes state with ``uow.run(work)`` (committed when ``work`` returns, rolled back when it raises, run again on
a fresh transaction after a serialization failure, so ``work`` sends nothing and reaches no failpoint) and
looks with ``uow.read(work)`` (no transaction, nothing locked, nothing emitted). The SQL ``Work`` is
``adapters.sql_work``; the memory one (``erpilot_platform.testing.memory_uow``) lives with the tests.

Session events are numbered by the session (gap-free ``seq``) and relayed through the outbox; a repository
that appends them writes their outbox rows itself (in one statement with the call's change where it can).

``CallDownstream`` is the ERP and the approval service's policy; ``DriverLocks`` the exclusive right to drive a
session's run. A downstream answer that is not ok raises ``erpilot_platform.broker.ReplyError``.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel

from erpilot_agent.domain.run_state import Run
from erpilot_agent.domain.runs import StoredEntry
from erpilot_agent.domain.tool_calls import SessionEvent, ToolCall
from erpilot_contracts.approval.v1 import PolicyViewV1, ToolPolicyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, PreparedOperationV1, PrepareOperationV1, ToolResultV1
from erpilot_platform.uow import UnitOfWorkPort


@dataclass
class CallRecord:
    """One recorded call: its identity and bookkeeping around the domain's ``ToolCall``."""

    call_key: str  # domain.call_identity: session id and call id together
    call_id: str
    session_id: str
    run_id: str | None
    source: str  # "model" | "external"
    operation_id: str
    request_hash: str
    assertion: str | None  # the requester assertion of the command (or run) that made the call
    created_at: datetime
    updated_at: datetime
    call: ToolCall


@dataclass
class SessionRecord:
    session_id: str
    owner: str
    title: str | None
    created_at: datetime
    last_seq: int  # the seq of the session's last event (0: none yet)
    active_run_id: str | None


@dataclass
class StoredEvent:
    seq: int
    type: str
    data: dict[str, Any]
    occurred_at: datetime


class CallRepository(Protocol):
    async def get(self, call_key: str, *, lock: bool = False) -> CallRecord | None:
        """The call, or None; ``lock`` holds it (and its session's event numbering) until the unit of work ends."""
        ...

    async def add(self, *, call_key: str, call_id: str, session_id: str, run_id: str | None, source: str,
                  request_hash: str, operation_id: str, assertion: str | None, call: ToolCall) -> CallRecord | None:
        """Record a new call, locked as ``get(lock=True)``; None if a concurrent delivery recorded it first."""
        ...

    async def save(self, call_key: str, call: ToolCall, *, events: list[SessionEvent] = (),
                   operation_id: str | None = None) -> CallRecord:
        """Store the call's new state (its arguments included) with ``events`` appended to its session; an edit
        also gives it its new ``operation_id``. Returns the call as stored. (SQL, after ``get(lock=True)``: one
        statement.)"""
        ...

    async def of_session(self, session_id: str, call_ids: list[str]) -> list[CallRecord]:
        """The session's calls among ``call_ids`` (call ids are unique per session only)."""
        ...

    async def in_session(self, session_id: str) -> list[CallRecord]:
        """Every call of the session, oldest first."""
        ...

    async def undecided_in_run(self, session_id: str, run_id: str) -> list[CallRecord]:
        """The run's writes with no decision yet (being prepared, or awaiting approval), oldest first."""
        ...

    async def left_by_their_request(self, *, untouched_for_seconds: float = 0.0) -> list[CallRecord]:
        """External calls recorded and not yet driven as far as they go without a person (a read or draft still
        ``running``, a write still ``preparing``), unchanged for at least ``untouched_for_seconds``, oldest first:
        the handler of their ``req.agent.tool_call`` may have died (or given up) after it stored them, and no
        stream will deliver that request again."""
        ...


class SessionRepository(Protocol):
    async def get(self, session_id: str, *, lock: bool = False) -> SessionRecord | None:
        """The session; ``lock`` orders this unit of work's events and history after every earlier writer's."""
        ...

    async def add(self, session_id: str, owner: str, title: str | None) -> None:
        """A new session; nothing if one with this id exists (a concurrent delivery stored it first)."""
        ...

    async def owned_by(self, owner: str, *, q: str | None, before: tuple[datetime, str] | None,
                       limit: int) -> list[SessionRecord]:
        """The owner's sessions newest first (``created_at``, then ``session_id``), older than ``before``;
        ``q`` a case-insensitive substring of the title."""
        ...

    async def events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[StoredEvent]:
        """The session's events after ``after_seq`` in ``seq`` order, at most ``limit`` of them (None: all)."""
        ...

    async def shows(self, session_id: str, type_: str, **data: str) -> bool:
        """Whether the session has an event of ``type_`` whose data has all these values."""
        ...

    async def append(self, session_id: str, events: list[SessionEvent]) -> None:
        """Append the events with the next gap-free seqs, each queued in the outbox for the session stream."""
        ...

    async def set_active_run(self, session_id: str, run_id: str | None, *, if_active: str | None = None) -> None:
        """Name the session's active run (None: none); ``if_active``: only if that run is the active one."""
        ...


class RunRepository(Protocol):
    async def get(self, run_id: str) -> Run | None: ...

    async def by_message(self, session_id: str, message_id: str) -> Run | None:
        """The run the message ``message_id`` of the session started."""
        ...

    async def working(self, session_id: str) -> Run | None:
        """The session's latest run that blocks a new message (``run_sharing.BLOCKING_RUN_STATES``)."""
        ...

    async def of_session(self, session_id: str) -> list[Run]:
        """The session's runs, oldest first."""
        ...

    async def add(self, run: Run) -> None: ...

    async def save(self, run: Run) -> None:
        """Store the run's status, error, steps and failed attempts."""
        ...

    async def history(self, session_id: str) -> list[StoredEntry]:
        """The session's whole history, every run, in order."""
        ...

    async def append_history(self, session_id: str, run_id: str, entries: list[dict[str, Any]]) -> None:
        """Append entries at the next positions (the caller holds the session's lock)."""
        ...

    async def resumable(self, run_id: str) -> bool:
        """The run waits, and none of its calls blocks it (``run_state.BLOCKING_CALL_STATES``)."""
        ...

    async def due(self, *, now: datetime, stale_seconds: float, max_delay_seconds: float) -> list[str]:
        """Runs nobody seems to drive: ``running`` and unchanged for ``stale_seconds``, or waiting with nothing
        blocking them; after failed attempts not before ``stale_seconds`` × 2^(attempts − 1) (at most
        ``max_delay_seconds``) since the last."""
        ...

    async def any_running(self) -> bool: ...


class Work(Protocol):
    """One unit of work of the agent: its repositories on one transaction, and the outbox."""

    calls: CallRepository
    sessions: SessionRepository
    runs: RunRepository

    async def emit(self, subject: str, payload: BaseModel | dict[str, Any], msg_id: str | None = None) -> None:
        """Publish ``payload`` on ``subject`` once this unit of work commits (the outbox)."""
        ...


AgentUnitOfWork = UnitOfWorkPort[Work]


class DriverLocks(Protocol):
    def hold(self, session_id: str) -> AbstractAsyncContextManager[bool]:
        """The exclusive right to drive the session's run, held until exit; yields False if another has it."""
        ...


class CallDownstream(Protocol):
    async def policy(self, tool: str) -> ToolPolicyV1:
        """The tool's policy in force (may come from a cache: see ``policy_version_seen``)."""
        ...

    async def policy_view(self) -> PolicyViewV1: ...

    def policy_version_seen(self, version: str) -> None:
        """An approval was stored under policy ``version``: a cached policy of another version is stale."""
        ...

    async def read(self, cmd: ExecuteToolV1) -> ToolResultV1: ...

    async def draft(self, cmd: ExecuteToolV1) -> ToolResultV1: ...

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        """The ERP prepared the operation and put its approval request in its outbox (a refusal raises)."""
        ...
