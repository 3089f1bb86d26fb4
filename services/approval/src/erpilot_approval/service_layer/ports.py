"""What the approval use cases need from the outside world: a store that runs one unit of work at a time,
and the ERP.

A unit of work is one transaction over the approvals (``approvals``: rows by key, their votes, their
decision log and their once-only expiry warnings), the audit trail (``audit``: rows appended in the same
transaction as the change they record, and its signed checkpoints), the webhook deliveries
(``webhooks``) and the outbox (``emit``: events published after the commit). ``now()`` is the clock decisions
are taken by: the database's, read at the call, so a use case reads it after taking its row locks and a
wait for a lock counts against a deadline. ``ApprovalStore.run(work)`` commits when ``work`` returns and
rolls back when it raises; the SQL store runs ``work`` again on a fresh transaction after a
serialization failure or deadlock, so ``work`` must not act outside its unit of work. The read side
(queries, the pending gauge, the sweepers' "when next") uses ``ApprovalStore.read``: the same unit of
work on what is committed, locking and committing nothing.

The SQL implementation is ``adapters.store.SqlApprovalStore`` and the NATS ERP ``adapters.erp.ErpClient``;
the unit tests use ``adapters.memory_store.MemoryApprovalStore`` (a settable clock) and a fake ERP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.audit import AuditRow, Checkpoint
from erpilot_approval.domain.policy import Policy
from erpilot_approval.domain.votes import Vote
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.erp.v1 import PreparedOperationV1, PreparedRecordV1, PrepareOperationV1

T = TypeVar("T")


@dataclass(frozen=True)
class ListFilter:
    """``GET /v1/approvals`` filters beside the status; ``before`` is the decoded cursor (created_at, id)."""

    session_id: str | None = None
    tool: str | None = None
    requested_by: str | None = None
    since: datetime | None = None
    before: tuple[datetime, str] | None = None


class ApprovalRepository(Protocol):
    """Approvals by key; ``lock`` holds the row FOR UPDATE until the unit of work ends (lock order: the
    approval rows in ``pending_id`` order, then the audit chain)."""

    async def get(self, pending_id: str, *, lock: bool = False) -> PendingApproval | None:
        """One approval with its votes."""
        ...

    async def get_by_operation(self, operation_id: str, *, votes: bool = True) -> PendingApproval | None:
        """The approval of an operation; ``votes=False``: without its votes (one read less), for who needs
        only the approval's own fields."""
        ...

    async def insert_new(self, approval: PendingApproval, *, trace_context: dict[str, str] | None = None) -> bool:
        """Store a new approval; False if one for its ``operation_id`` exists (a concurrent twin won).
        ``trace_context``: the trace later steps continue (default: the current one)."""
        ...

    async def trace_context(self, pending_id: str) -> dict[str, str] | None:
        """The trace stored with the approval (None for approvals stored before traces were)."""
        ...

    async def append_vote(self, pending_id: str, vote: Vote) -> None:
        """One vote (row lock held; one per person and version)."""
        ...

    async def save_outcome(self, approval: PendingApproval, grant: GrantV1 | None = None) -> None:
        """How the approval left ``pending`` (row lock held); ``expires_at`` is never written."""
        ...

    async def append_decision(self, pending_id: str, *, actor: str, action: str, fingerprint: str,
                              comment: str | None, at: datetime) -> None:
        """Append to the decision log (never updated or deleted)."""
        ...

    async def pending_of_calls(self, session_id: str, call_ids: list[str]) -> list[str]:
        """The pending approvals (every version) of these calls of this session, in ``pending_id`` order."""
        ...

    async def lock_due(self, now: datetime, limit: int) -> list[PendingApproval]:
        """Pending approvals due at ``now``, locked, earliest deadline first; rows others hold are skipped."""
        ...

    async def status(self, pending_id: str) -> str | None:
        """The approval's status alone (None: no such approval)."""
        ...

    async def list_decidable(self, roles: list[str], *, status: str, where: ListFilter,
                             limit: int) -> list[PendingApproval]:
        """Approvals in ``status`` that one of ``roles`` may decide, newest first (created_at, pending_id)."""
        ...

    async def count_pending(self) -> int: ...

    async def seconds_to_next_deadline(self) -> float | None:
        """Seconds from now to the earliest pending deadline (negative when overdue), or None."""
        ...

    async def lock_due_warnings(self, tool: str, warn_before: timedelta, now: datetime,
                                limit: int) -> list[PendingApproval]:
        """Pending approvals of ``tool`` within ``warn_before`` of their deadline and not yet warned, locked;
        rows others hold are skipped."""
        ...

    async def record_warning(self, pending_id: str, at: datetime) -> bool:
        """The approval's one expiry warning; False if it was warned already."""
        ...


class AuditLog(Protocol):
    async def append(self, kind: str, *, pending_id: str | None, operation_id: str | None, actor: str | None,
                     data: dict[str, Any], once: bool = False) -> bool:
        """One signed row at the chain's end (``once``: unless this kind exists for this operation);
        False when skipped."""
        ...

    async def checkpoint(self) -> Checkpoint | None:
        """Sign the chain's head unless it is signed already (or the log is empty)."""
        ...

    async def rows_of(self, *, pending_id: str | None, operation_id: str | None, since: datetime | None,
                      limit: int) -> list[AuditRow]:
        """The rows about one approval or operation (and/or since a time), oldest first."""
        ...


class WebhookDeliveries(Protocol):
    """Rows of ``webhook_deliveries``: one per event and endpoint (``event_id``, ``event_type``, ``pending_id``,
    ``url``, ``body``, ``attempts``, ``created_at``, ``delivery_id``)."""

    async def add(self, *, event_id: str, event_type: str, pending_id: str | None, body: str,
                  urls: list[str]) -> int:
        """One delivery per endpoint; an event seen again adds nothing. Returns how many were new."""
        ...

    async def claim_due(self, now: datetime, limit: int, lease: timedelta) -> list[Any]:
        """Due deliveries, leased for ``lease`` (another replica skips them meanwhile; a crash frees them)."""
        ...

    async def finish(self, delivery_id: int, *, status: str, attempts: int, at: datetime,
                     error: str | None = None) -> None:
        """A delivery ends: ``delivered``, ``dead`` (gave up) or ``skipped``."""
        ...

    async def retry_later(self, delivery_id: int, *, attempts: int, at: datetime, error: str) -> None: ...

    async def seconds_to_next(self) -> float | None:
        """Seconds from now to the earliest pending delivery's next attempt, or None."""
        ...


class ApprovalUnitOfWork(Protocol):
    approvals: ApprovalRepository
    audit: AuditLog
    webhooks: WebhookDeliveries

    async def now(self) -> datetime:
        """The database's clock now (not the transaction's start): every replica shares it."""
        ...

    async def emit(self, subject: str, payload: BaseModel) -> None:
        """An event to publish once this unit of work commits (outbox)."""
        ...


class ApprovalStore(Protocol):
    async def run(self, work: Callable[[ApprovalUnitOfWork], Awaitable[T]]) -> T:
        """Run ``work`` in one unit of work: committed when it returns, rolled back when it raises."""
        ...

    async def read(self, work: Callable[[ApprovalUnitOfWork], Awaitable[T]]) -> T:
        """Run ``work`` on what is committed, without a lock or a commit (a look before the transaction)."""
        ...

    async def read_one(self, work: Callable[[ApprovalUnitOfWork], Awaitable[T]]) -> T:
        """``read`` for a ``work`` of one statement, which is consistent on its own: no transaction is
        opened around it (two round trips fewer). Never for more than one statement."""
        ...

    def wake(self) -> None:
        """Tell the outbox relay that events were committed."""
        ...


class ErpPort(Protocol):
    async def prepared(self, operation_id: str) -> PreparedRecordV1 | None:
        """The ledger's record of ``operation_id`` (None: never prepared); ``ServiceUnavailable`` if no answer."""
        ...

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        """The ERP's preview of an operation; its refusal raises ``erpilot_platform.broker.ReplyError``."""
        ...


@dataclass(frozen=True)
class Ports:
    """What every approval use case works with: the store and the ERP, the policy in force, the grant key."""

    store: ApprovalStore
    erp: ErpPort
    policy: Policy
    signing_key: Ed25519PrivateKey
    new_deadline: Callable[[], None] = lambda: None  # wakes the expiry sweeper after a new approval commits
