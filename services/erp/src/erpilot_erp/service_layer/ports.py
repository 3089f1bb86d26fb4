"""What the ERP's use cases need from the outside world: one unit of work over the ledger.

A ``Work`` is one database transaction (``erpilot_platform.uow``): the ledger's rows (``ledger``), its inbox
(``claim`` / ``record``: the answers of handled commands, by key) and its outbox (``emit``: events and the next
command of the write path, published after the commit). ``Ledger.run(work)`` commits when ``work`` returns and
rolls back when it raises (a serialization failure or deadlock runs ``work`` again on a fresh transaction);
``Ledger.read(work)`` answers from what is committed, one statement per question, with no transaction.

The SQL ``Work`` is ``adapters.ledger.SqlWork`` (on ``erpilot_platform.uow.UnitOfWork``); the unit tests run the
same use cases on ``services/erp/tests/fakes.py`` (on ``MemoryUnitOfWork``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from erpilot_erp.domain.model import Customer, DraftRevision, Order, Product
from erpilot_erp.domain.plans import CommitPlan, Rows
from erpilot_platform.uow import UnitOfWorkPort

IdKind = str
"""``draft`` or a write tool's ``new_id_kind`` (``order``, ``refund``, ``credit_note``)."""


@dataclass(frozen=True)
class OperationRecord:
    """One stored operation (a row of ``operations``): what prepare stored and what commit recorded.

    The ledger's one record of an operation: the approval request is built from it (``requests.approval_request``),
    the operation status and ``evt.erp.operation_finished`` too.
    """

    operation_id: str
    tool: str
    session_id: str
    call_id: str
    requested_by: str
    arguments: dict[str, Any]
    fingerprint: str
    facts: dict[str, Any]
    preview: dict[str, Any]
    status: str  # prepared | committed | rejected
    tool_schema_version: int = 1
    assertion: str | None = None
    asserted_at: datetime | None = None
    supersedes: str | None = None
    prepared_at: datetime | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    grant_pending_id: str | None = None
    decided_by: str | None = None
    created_at: datetime | None = None
    committed_at: datetime | None = None


@dataclass(frozen=True)
class NewOperation:
    """What prepare stores (an ``OperationRecord`` without status and outcome)."""

    operation_id: str
    tool: str
    tool_schema_version: int
    session_id: str
    call_id: str
    requested_by: str
    assertion: str
    asserted_at: datetime
    supersedes: str | None
    arguments: dict[str, Any]
    fingerprint: str
    facts: dict[str, Any]
    preview: dict[str, Any]
    prepared_at: datetime


@dataclass(frozen=True)
class Outcome:
    """How a commit ended: ``committed`` with its result or ``rejected`` with its business error, under a grant."""

    status: Literal["committed", "rejected"]
    pending_id: str
    decided_by: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class StoredRevision:
    """A draft revision as stored (with its draft's session and status) and the draft's latest revision number."""

    revision: DraftRevision
    latest_revision: int


class LedgerRepository(Protocol):
    """Rows by key; ``lock`` holds them FOR UPDATE until the unit of work ends (lock order: operation ->
    draft or order -> products in SKU order). In a ``read`` unit of work each call is one statement."""

    async def next_id(self, kind: IdKind) -> str:
        """A new ``D-``/``O-``/``R-``/``CN-`` number."""
        ...

    async def customer(self, customer_id: str) -> Customer | None: ...

    async def products_by_sku(self, skus: Iterable[str], *, lock: bool = False) -> dict[str, Product]: ...

    async def search_products(self, query: str) -> list[Product]:
        """Products whose SKU or name contains ``query`` (``domain.reads`` semantics), by SKU, at most 50."""
        ...

    async def search_customers(self, query: str) -> list[Customer]:
        """Customers whose id or name contains ``query`` (``domain.reads`` semantics), by id, at most 50."""
        ...

    async def latest_draft(self, draft_id: str, *, lock: bool = False) -> DraftRevision | None: ...

    async def draft_revision(self, draft_id: str, revision: int | None) -> StoredRevision | None:
        """A revision of a draft (None: its latest), whatever its session; None when there is no such revision."""
        ...

    async def open_drafts(self, session_id: str) -> list[DraftRevision]:
        """The latest revision of every open draft of the session."""
        ...

    async def insert_revision(self, revision: DraftRevision, *, operation_id: str) -> None:
        """Store a new draft (revision 1) or its next revision and make it the latest."""
        ...

    async def order(self, order_id: str, *, lock: bool = False) -> Order | None: ...

    async def row_set(self, kind: Rows, key: str) -> list[Any]:
        """The records of row set ``kind`` under ``key`` (for ``Rows.of_order`` the order's id), oldest first, not
        locked; one loader per record kind (``adapters.records``), so a new kind adds no method here."""
        ...

    async def apply_plan(self, plan: CommitPlan, *, operation_id: str) -> None:
        """Every effect of a commit; a guard that fails raises ``StaleWrite`` (a bug, never a business case)."""
        ...

    async def operation(self, operation_id: str, *, lock: bool = False) -> OperationRecord | None: ...

    async def operation_for_call(self, session_id: str, call_id: str) -> OperationRecord | None:
        """The first version (``supersedes`` None) of the session's call ``call_id``, if it was prepared."""
        ...

    async def insert_operation(self, operation: NewOperation) -> OperationRecord:
        """Store a prepared operation; returns it as recorded."""
        ...

    async def finish_operation(self, operation_id: str, outcome: Outcome) -> OperationRecord:
        """Record a prepared operation's outcome; returns it as recorded."""
        ...

    async def consume_grant(self, pending_id: str, operation_id: str) -> bool:
        """Mark the grant used; False when it already was (by this or another operation)."""
        ...

    async def update_product(self, sku: str, changes: Mapping[str, Any]) -> Product | None:
        """Change a product's price and/or status; None when there is no such product."""
        ...


class Work(Protocol):
    """One unit of work of the ERP: the ledger's rows, its inbox and its outbox, in one transaction."""

    ledger: LedgerRepository

    async def emit(self, subject: str, payload: BaseModel | dict[str, Any], msg_id: str | None = None) -> None:
        """Publish ``payload`` on ``subject`` once this unit of work commits (the outbox)."""
        ...

    async def claim(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        """Claim an inbox key: ``(True, None)`` the first time, ``(False, recorded)`` once handled."""
        ...

    async def record(self, key: str, response: dict[str, Any]) -> None:
        """Store the answer under a claimed key, in this unit of work."""
        ...


Ledger = UnitOfWorkPort[Work]
