"""What the approval use cases need from the outside world: a unit of work, and the ERP (for edits).

The unit of work is the platform's (``erpilot_platform.uow``): ``run(work)`` is one transaction, committed
when ``work`` returns and rolled back when it raises (the SQL one runs ``work`` again on a fresh transaction
after a serialization failure or deadlock, so ``work`` must not act outside it); ``read(work)`` runs on what is
committed, locking and emitting nothing; ``wake()`` tells the outbox relay (``run`` does it after an emit).

``work`` gets this service's ``Work``: the approvals (``approvals``: rows by key, their votes, their decision
log, their escalations and their once-only expiry warnings), the edit intents (``edits``), the delegations
(``delegations``), the standing approvals (``standing``), the audit trail (``audit``: rows
appended in the same transaction as the change they record, and its signed checkpoints), the webhook
deliveries (``webhooks``), the outbox (``emit``: messages published after the commit) and ``now()``, the
clock decisions are taken by: the database's, read at the call, so a use case reads it after taking its row
locks and a wait for a lock counts against a deadline.

The SQL ``Work`` is ``adapters.store.SqlApprovalWork`` and the NATS ERP ``adapters.erp.ErpClient``; the unit
tests use ``tests/fakes.py`` (``MemoryUnitOfWork`` with a settable clock) and a fake ERP.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.audit import AuditRow, Checkpoint
from erpilot_approval.domain.delegation import Delegation, RoleScope
from erpilot_approval.domain.edits import EditIntent
from erpilot_approval.domain.people import Directory
from erpilot_approval.domain.policy import Policy
from erpilot_approval.domain.standing import StandingApproval
from erpilot_approval.domain.standing_runs import StandingRun
from erpilot_approval.domain.votes import Vote
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.erp.v1 import PreparedOperationV1, PrepareOperationV1
from erpilot_platform.uow import UnitOfWorkPort


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

    async def first_of_call(self, session_id: str, call_id: str) -> PendingApproval | None:
        """The approval of the call's first version (``supersedes`` None), whatever its status, without votes."""
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
                              comment: str | None, at: datetime, on_behalf_of: str | None = None) -> None:
        """Append to the decision log (never updated or deleted); ``on_behalf_of``: a delegate's, for whom."""
        ...

    async def save_escalation(self, approval: PendingApproval) -> None:
        """Store an escalation (row lock held): ``required_roles`` and ``escalated_at`` only."""
        ...

    async def lock_due_escalations(self, now: datetime, limit: int) -> list[PendingApproval]:
        """Pending approvals not yet escalated whose ``escalate_at`` is at or before ``now``, locked, earliest
        first; rows others hold are skipped."""
        ...

    async def seconds_to_next_escalation(self) -> float | None:
        """Seconds from now to the earliest escalation due (negative when overdue), or None."""
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

    async def list_decidable(self, roles: list[str], *, status: str, where: ListFilter, limit: int,
                             delegated: Sequence[RoleScope] = ()) -> list[PendingApproval]:
        """Approvals in ``status`` that one of ``roles`` may decide, or one of a ``delegated`` scope's roles for its
        tools, newest first (created_at, pending_id)."""
        ...

    async def naming(self, *, draft_ids: list[str], order_ids: list[str], roles: list[str],
                     statuses: tuple[str, ...], limit: int) -> list[PendingApproval]:
        """Approvals in ``statuses`` whose arguments name one of these drafts (``draft_id``) or orders
        (``order_id``) and that one of ``roles`` may decide, newest first, at most ``limit``."""
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

    async def rows_after(self, after_seq: int, *, since: datetime | None, limit: int) -> list[AuditRow]:
        """The rows after ``after_seq`` (and at or after ``since``), in ``seq`` order, at most ``limit``."""
        ...

    async def checkpoints(self) -> list[Checkpoint]:
        """Every signed checkpoint, in ``seq`` order."""
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


class EditIntents(Protocol):
    """Rows of ``approval.edits``: the edits this service asked the ledger to prepare, by the new operation."""

    async def get(self, operation_id: str) -> EditIntent | None: ...

    async def add(self, intent: EditIntent) -> bool:
        """Record an intent; False if one for its operation exists (the first one stands)."""
        ...

    async def refuse(self, operation_id: str, refusal: dict[str, Any]) -> None:
        """The intent ended without a new version (``{code, status, message}``)."""
        ...

    async def forget(self, operation_id: str) -> None:
        """Drop an intent the ledger refused to prepare: no request will ever come for it."""
        ...


class Delegations(Protocol):
    """Rows of ``approval.delegations`` (never deleted: a revocation is a time)."""

    async def get(self, delegation_id: str, *, lock: bool = False) -> Delegation | None: ...

    async def add(self, delegation: Delegation) -> bool:
        """Store a new delegation; False if one with its id exists (a redelivered give)."""
        ...

    async def save_revocation(self, delegation: Delegation) -> None: ...

    async def in_force(self, people: list[str], now: datetime, *, delegate_only: bool = False,
                       lock: bool = False) -> list[Delegation]:
        """In force at ``now``, to these people (and, unless ``delegate_only``, from them), oldest first; ``lock``
        holds them (shared) until the unit of work ends, so a revocation waits for a decision that uses one."""
        ...

    async def serialise_gives(self) -> None:
        """Gives run one at a time until this unit of work ends (the chain check sees every earlier give)."""
        ...


class StandingApprovals(Protocol):
    """Rows of ``approval.standing_approvals`` (never deleted: a revocation is a time)."""

    async def get(self, standing_id: str, *, lock: bool = False) -> StandingApproval | None: ...

    async def add(self, standing: StandingApproval) -> bool:
        """Store a new one; False if one with its id exists (a redelivered give)."""
        ...

    async def save_revocation(self, standing: StandingApproval) -> None: ...

    async def in_force(self, now: datetime, *, giver: str | None = None, session_id: str | None = None,
                       tool: str | None = None, lock: bool = False) -> list[StandingApproval]:
        """In force at ``now``, oldest first; ``lock`` holds them (shared): a revocation waits for their use."""
        ...

    async def run(self, session_id: str, run_id: str) -> StandingRun:
        """The run's row, created if it has none, and held (exclusive) until the unit of work ends: a request of
        the run and its end come one after the other, and two requests of a run count one after the other."""
        ...

    async def save_run(self, run: StandingRun) -> None: ...


class Work(Protocol):
    """One unit of work of the approval service (``UnitOfWorkPort[Work]``)."""

    approvals: ApprovalRepository
    edits: EditIntents
    delegations: Delegations
    standing: StandingApprovals
    audit: AuditLog
    webhooks: WebhookDeliveries

    async def now(self) -> datetime:
        """The database's clock now (not the transaction's start): every replica shares it."""
        ...

    async def emit(self, subject: str, payload: BaseModel, msg_id: str | None = None) -> None:
        """A message to publish once this unit of work commits (outbox); ``msg_id`` its ``Nats-Msg-Id``."""
        ...


ApprovalUnitOfWork = UnitOfWorkPort[Work]


class DeadLetters(Protocol):
    async def publish(self, body: bytes, *, source: str, headers: dict[str, str]) -> None:
        """Copy what this service gave up on to the dead-letter stream, under its own namespace (``source``:
        what it was, e.g. ``webhook.approval.resolved``)."""
        ...


class ErpPort(Protocol):
    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        """The ERP prepares an edited operation (and sends its request back through its outbox); its refusal
        raises ``erpilot_platform.broker.ReplyError``, no answer ``ServiceUnavailable``."""
        ...


@dataclass(frozen=True)
class Ports:
    """What every approval use case works with: the unit of work and the ERP, the policy in force, the grant
    signing key, the requester assertions' verify key and the ledger's verify key (its approval requests)."""

    unit: ApprovalUnitOfWork
    erp: ErpPort
    policy: Policy
    signing_key: Ed25519PrivateKey
    assertion_key: Ed25519PublicKey
    ledger_key: Ed25519PublicKey
    new_deadline: Callable[[], None] = lambda: None  # wakes the expiry and escalation sweepers after a new approval
    # Each person's roles now (``domain.people``: the policy's [people] and ERPILOT_ROLE_SOURCE); None: neither
    # is configured. Asked at each decision, so a changed role source counts at once.
    people: Callable[[], Directory | None] = lambda: None
    chat_secret: bytes | None = None  # ERPILOT_CHAT_SIGNING_SECRET: None, chat buttons are refused
    wake_webhooks: Callable[[], None] = lambda: None  # the webhook dispatcher: a chat card's update is waiting
