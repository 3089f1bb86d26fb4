"""What the tool-call pipeline needs from the outside world: a unit of work over the recorded calls
(with the session events they emit, and the sessions: ``session_ports``), and the downstream
services (the ERP and the approval service).

The SQL implementation is ``adapters.call_store.SqlCallUnitOfWork`` and the NATS one
``adapters.downstream.Downstream``; the unit tests use in-memory fakes. A downstream answer that is
not ok raises ``erpilot_platform.broker.ReplyError`` (its ``error`` is the service's ``ErrorV1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from erpilot_agent.domain.tool_calls import SessionEvent, ToolCall
from erpilot_agent.service_layer.session_ports import SessionRepository
from erpilot_contracts.approval.v1 import ApprovalRecordV1, GrantV1, PolicyViewV1, RequestApprovalV1, ToolPolicyV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, OperationStatusV1, PrepareOperationV1, ToolResultV1


class CallRejected(Exception):
    """The call cannot start; nothing was recorded. Carries the reply to give."""

    def __init__(self, reply: ReplyV1):
        super().__init__(reply.error.code)
        self.reply = reply


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
    grant: dict[str, Any] | None  # GrantV1 as JSON, once approved
    created_at: datetime
    updated_at: datetime
    call: ToolCall


class CallRepository(Protocol):
    async def get(self, call_key: str, *, lock: bool = False) -> CallRecord | None:
        """The call, or None; ``lock`` holds it against other transitions until the unit of work ends."""
        ...

    async def add(self, *, call_key: str, call_id: str, session_id: str, run_id: str | None, source: str,
                  request_hash: str, operation_id: str, call: ToolCall) -> CallRecord | None:
        """Record a new call and return it; None if a concurrent delivery of the same command recorded it first."""
        ...

    async def save(self, call_key: str, call: ToolCall, *, events: list[SessionEvent] = (), commit_sent: bool = False,
                   **columns: Any) -> CallRecord:
        """Store the call's new state with ``events`` appended to its session (as ``emit``) and return the
        call as stored; ``columns`` may replace ``operation_id``, ``arguments`` (an edit) or set ``grant``;
        ``commit_sent`` notes when the commit went out. (In SQL, after ``get(lock=True)``, one statement.)"""
        ...

    async def of_session(self, session_id: str, call_ids: list[str]) -> list[CallRecord]:
        """The session's calls among ``call_ids`` (call ids are unique per session only)."""
        ...

    async def in_session(self, session_id: str) -> list[CallRecord]:
        """Every call of the session, oldest first."""
        ...

    async def stuck(self, states: tuple[str, ...], older_than: timedelta) -> list[CallRecord]:
        """Calls in one of ``states`` that have not changed for ``older_than`` (oldest first, a batch)."""
        ...


class CallUnitOfWork(Protocol):
    """One transaction: what is not committed when the block ends is rolled back. A read-only one (the
    factory's ``read_only=True``) only reads, each read as of its own moment (as READ COMMITTED reads
    are anyway), takes no locks and cannot emit or commit."""

    calls: CallRepository
    sessions: SessionRepository

    async def __aenter__(self) -> CallUnitOfWork: ...

    async def __aexit__(self, *exc_info: Any) -> None: ...

    async def owner_of(self, session_id: str) -> str | None:
        """The owner of the session, None if there is no such session."""
        ...

    async def emit(self, session_id: str, events: list[SessionEvent]) -> None:
        """Append the events to the session's stream (published after the commit, through the outbox)."""
        ...

    async def commit(self) -> None: ...


class UnitOfWorkFactory(Protocol):
    def __call__(self, *, read_only: bool = False) -> CallUnitOfWork: ...


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

    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        """The ERP's answer as is: ``ok`` with the preview, or a business rejection."""
        ...

    async def request_approval(self, cmd: RequestApprovalV1) -> ApprovalRecordV1: ...

    async def commit(self, operation_id: str, grant: GrantV1) -> OperationStatusV1: ...

    async def operation_status(self, operation_id: str) -> OperationStatusV1: ...
