"""What the ERP's commands need from the outside world: a ledger that runs one unit of work at a time.

A unit of work is one transaction over the ledger's rows (``repo``), its inbox (the answers of handled
commands, by key) and its outbox (events published after the commit). ``Ledger.run(work)`` commits
when ``work`` returns and rolls back when it raises; the SQL ledger retries a serialization failure or
deadlock by running ``work`` again on a fresh transaction.

The read side (read tools, back-office views, operation status) needs no unit of work: ``LedgerReads``
answers each question from what is committed, locking and committing nothing.

The SQL implementations are ``adapters.ledger.SqlLedger`` and ``adapters.reads.SqlLedgerReads``; the unit
tests use ``adapters.memory_ledger`` (``MemoryLedger``, ``MemoryLedgerReads``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel

from erpilot_erp.domain.model import Customer, DraftRevision, Order, Product
from erpilot_erp.domain.plans import CommitPlan

T = TypeVar("T")
IdKind = Literal["draft", "order", "refund"]


@dataclass(frozen=True)
class OperationRecord:
    """One stored operation (a row of ``operations``): what prepare stored and what commit recorded."""

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
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    grant_pending_id: str | None = None
    created_at: datetime | None = None
    committed_at: datetime | None = None


class LedgerRepository(Protocol):
    """Rows by key; ``lock`` holds them FOR UPDATE until the unit of work ends (lock order: operation ->
    draft or order -> products in SKU order)."""

    async def next_id(self, kind: IdKind) -> str:
        """A new ``D-``/``O-``/``R-`` number."""
        ...

    async def customer(self, customer_id: str) -> Customer | None: ...

    async def products_by_sku(self, skus: Iterable[str], *, lock: bool = False) -> dict[str, Product]: ...

    async def latest_draft(self, draft_id: str, *, lock: bool = False) -> DraftRevision | None: ...

    async def insert_revision(self, revision: DraftRevision, *, operation_id: str) -> None:
        """Store a new draft (revision 1) or its next revision and make it the latest."""
        ...

    async def order(self, order_id: str, *, lock: bool = False) -> Order | None: ...

    async def apply_plan(self, plan: CommitPlan, *, operation_id: str, session_id: str) -> None:
        """Every effect of a commit; a guard that fails raises ``StaleWrite`` (a bug, never a business case)."""
        ...

    async def operation(self, operation_id: str, *, lock: bool = False) -> OperationRecord | None: ...

    async def insert_operation(self, **values: Any) -> None:
        """Store a prepared operation (``OperationRecord``'s fields without status and outcome)."""
        ...

    async def finish_operation(self, operation_id: str, *, status: str, pending_id: str,
                               result: dict[str, Any] | None = None,
                               error: dict[str, Any] | None = None) -> OperationRecord: ...

    async def consume_grant(self, pending_id: str, operation_id: str) -> bool:
        """Mark the grant used; False when it already was (by this or another operation)."""
        ...

    async def update_product(self, sku: str, changes: Mapping[str, Any]) -> Product | None:
        """Change a product's price and/or status; None when there is no such product."""
        ...


class LedgerUnitOfWork(Protocol):
    repo: LedgerRepository

    async def claim(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        """Claim an inbox key: ``(True, None)`` the first time, ``(False, recorded)`` once handled."""
        ...

    async def record(self, key: str, response: dict[str, Any]) -> None:
        """Store the answer under a claimed key, in this unit of work."""
        ...

    async def emit(self, subject: str, payload: BaseModel, *, msg_id: str) -> None:
        """An event to publish once this unit of work commits (outbox)."""
        ...


class LedgerReads(Protocol):
    """Committed state in SPEC §2 result shapes (``to_result()``); each call is one read-only look."""

    async def search_customers(self, query: str) -> dict[str, Any]:
        """``{"items": [...]}``: id or name contains ``query`` (``domain.reads`` semantics)."""
        ...

    async def search_products(self, query: str) -> dict[str, Any]: ...

    async def product(self, sku: str) -> dict[str, Any] | None: ...

    async def order(self, order_id: str) -> dict[str, Any] | None: ...

    async def draft_revision(self, draft_id: str, revision: int | None,
                             session_id: str | None) -> dict[str, Any] | None:
        """A revision (None: the latest) with ``latest_revision``; ``session_id`` restricts it to its owning
        session (None: the back-office view)."""
        ...

    async def open_drafts(self, session_id: str) -> list[DraftRevision]:
        """The latest revision of every open draft of the session."""
        ...

    async def operation(self, operation_id: str) -> OperationRecord | None: ...


class Ledger(Protocol):
    async def run(self, work: Callable[[LedgerUnitOfWork], Awaitable[T]]) -> T:
        """Run ``work`` in one unit of work: committed when it returns, rolled back when it raises."""
        ...

    def wake(self) -> None:
        """Tell the outbox relay that events were committed."""
        ...
