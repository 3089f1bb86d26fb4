"""The ERP's ledger in memory: the ``Work`` of ``erpilot_erp.service_layer.ports`` on the platform's
``MemoryUnitOfWork``, for unit tests (and the memory half of the repository contract tests).

``MemoryUnitOfWork`` holds what is committed (``state``, the inbox and every message committed units of work
emitted, ``sent``); a unit of work runs on a deep copy that replaces it only when the work returns, so a raise (a
failpoint, a refusal, a ``StaleWrite``) leaves nothing behind, as the SQL rollback does. The guards of
``apply_plan`` and ``insert_revision`` are the SQL adapter's: a lost race raises ``StaleWrite``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

from erpilot_erp.adapters.repository import StaleWrite
from erpilot_erp.domain.issue_credit_note import NewCreditNote
from erpilot_erp.domain.model import CreditNote, Customer, DraftRevision, Order, Product, Refund
from erpilot_erp.domain.plans import (
    CommitPlan,
    DraftSubmission,
    NewOrder,
    NewRefund,
    OrderChange,
    Rows,
    StockChange,
)
from erpilot_erp.domain.reads import matching_customers, matching_products
from erpilot_erp.service_layer.ports import IdKind, NewOperation, OperationRecord, Outcome, StoredRevision
from erpilot_platform.testing.memory_uow import MemoryTransaction, MemoryUnitOfWork

PREFIXES = {"draft": "D", "order": "O", "refund": "R", "credit_note": "CN"}


@dataclass
class StoredDraft:
    session_id: str
    status: str
    revisions: dict[int, DraftRevision] = field(default_factory=dict)
    owner: str | None = None

    @property
    def latest_revision(self) -> int:
        return max(self.revisions)

    def revision(self, number: int) -> DraftRevision:
        return replace(self.revisions[number], session_id=self.session_id, status=self.status,  # type: ignore[arg-type]
                       owner=self.owner)


@dataclass
class LedgerState:
    products: dict[str, Product] = field(default_factory=dict)
    customers: dict[str, Customer] = field(default_factory=dict)
    drafts: dict[str, StoredDraft] = field(default_factory=dict)
    orders: dict[str, Order] = field(default_factory=dict)
    refunds: dict[str, Refund] = field(default_factory=dict)
    credit_notes: dict[str, CreditNote] = field(default_factory=dict)
    operations: dict[str, OperationRecord] = field(default_factory=dict)
    consumed_grants: dict[str, str] = field(default_factory=dict)  # pending_id -> operation_id
    numbers: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PREFIXES, 0))
    revision_operations: dict[tuple[str, int], str] = field(default_factory=dict)  # -> operation_id


class MemoryLedgerRepository:
    def __init__(self, state: LedgerState, clock: Callable[[], datetime]):
        self.state = state
        self.clock = clock

    async def next_id(self, kind: IdKind) -> str:
        self.state.numbers[kind] += 1
        return f"{PREFIXES[kind]}-{self.state.numbers[kind]}"

    async def customer(self, customer_id: str) -> Customer | None:
        return self.state.customers.get(customer_id)

    async def products_by_sku(self, skus: Iterable[str], *, lock: bool = False) -> dict[str, Product]:
        return {sku: self.state.products[sku] for sku in sorted(set(skus)) if sku in self.state.products}

    async def search_products(self, query: str) -> list[Product]:
        return matching_products(self.state.products.values(), query)

    async def search_customers(self, query: str) -> list[Customer]:
        return matching_customers(self.state.customers.values(), query)

    async def order(self, order_id: str, *, lock: bool = False) -> Order | None:
        return self.state.orders.get(order_id)

    async def latest_draft(self, draft_id: str, *, lock: bool = False) -> DraftRevision | None:
        draft = self.state.drafts.get(draft_id)
        return draft.revision(draft.latest_revision) if draft is not None else None

    async def draft_revision(self, draft_id: str, revision: int | None) -> StoredRevision | None:
        draft = self.state.drafts.get(draft_id)
        if draft is None or (revision or draft.latest_revision) not in draft.revisions:
            return None
        return StoredRevision(draft.revision(revision or draft.latest_revision), draft.latest_revision)

    async def open_drafts(self, session_id: str) -> list[DraftRevision]:
        return [draft.revision(draft.latest_revision) for draft in self.state.drafts.values()
                if draft.session_id == session_id and draft.status == "open"]

    async def insert_revision(self, revision: DraftRevision, *, operation_id: str) -> None:
        draft = self.state.drafts.get(revision.draft_id)
        if revision.revision == 1:
            if draft is not None:
                raise StaleWrite(f"draft {revision.draft_id} already exists")
            draft = StoredDraft(revision.session_id, "open", owner=revision.owner)
            self.state.drafts[revision.draft_id] = draft
        elif draft is None or draft.latest_revision != revision.revision - 1:
            raise StaleWrite(f"draft {revision.draft_id} moved while locked")
        draft.revisions[revision.revision] = revision
        self.state.revision_operations[(revision.draft_id, revision.revision)] = operation_id

    async def row_set(self, kind: Rows, key: str) -> list[Any]:
        if kind is Rows.ORDER_CREDIT_NOTES:
            return [note for note in self.state.credit_notes.values() if note.order_id == key]
        raise TypeError(f"no way to load {kind!r}")  # as the SQL adapter's registry has none

    async def apply_plan(self, plan: CommitPlan, *, operation_id: str) -> None:
        for effect in plan.effects:
            self._apply(effect)

    def _apply(self, effect: object) -> None:
        if isinstance(effect, StockChange):
            product = self.state.products.get(effect.sku)
            if product is None or product.on_hand != effect.before:
                raise StaleWrite(f"on-hand of {effect.sku} is no longer {effect.before}")
            self.state.products[effect.sku] = replace(product, on_hand=effect.after)
        elif isinstance(effect, NewOrder):
            self.state.orders[effect.order.order_id] = effect.order
        elif isinstance(effect, OrderChange):
            old = self.state.orders[effect.order.order_id]
            self.state.orders[old.order_id] = replace(old, status=effect.order.status,
                                                      refunded_minor=effect.order.refunded_minor)
        elif isinstance(effect, DraftSubmission):
            draft = self.state.drafts.get(effect.draft_id)
            if draft is None or draft.latest_revision != effect.revision or draft.status != "open":
                raise StaleWrite(f"draft {effect.draft_id} is no longer open at revision {effect.revision}")
            draft.status = "submitted"
        elif isinstance(effect, NewRefund):
            self.state.refunds[effect.refund.refund_id] = effect.refund
        elif isinstance(effect, NewCreditNote):
            self.state.credit_notes[effect.note.credit_note_id] = effect.note
        else:
            raise TypeError(f"no way to apply {effect!r}")  # as the SQL adapter's table has none

    async def operation(self, operation_id: str, *, lock: bool = False) -> OperationRecord | None:
        return self.state.operations.get(operation_id)

    async def operation_for_call(self, session_id: str, call_id: str) -> OperationRecord | None:
        return next((op for op in self.state.operations.values() if (op.session_id, op.call_id, op.supersedes)
                     == (session_id, call_id, None)), None)

    async def insert_operation(self, operation: NewOperation) -> OperationRecord:
        if operation.operation_id in self.state.operations:
            raise StaleWrite(f"operation {operation.operation_id} already exists")  # the primary key
        if operation.supersedes is None and await self.operation_for_call(operation.session_id, operation.call_id):
            raise StaleWrite(f"call {operation.call_id} already has an operation")  # uq_operations_call
        record = OperationRecord(status="prepared", created_at=self.clock(), **asdict(operation))
        self.state.operations[operation.operation_id] = record
        return record

    async def finish_operation(self, operation_id: str, outcome: Outcome) -> OperationRecord:
        op = self.state.operations.get(operation_id)
        if op is None or op.status != "prepared":
            raise StaleWrite(f"operation {operation_id} was finished while locked")
        done = replace(op, status=outcome.status, result=outcome.result, error=outcome.error,
                       grant_pending_id=outcome.pending_id, decided_by=outcome.decided_by,
                       committed_at=self.clock() if outcome.status == "committed" else None)
        self.state.operations[operation_id] = done
        return done

    async def consume_grant(self, pending_id: str, operation_id: str) -> bool:
        if pending_id in self.state.consumed_grants or operation_id in self.state.consumed_grants.values():
            return False
        self.state.consumed_grants[pending_id] = operation_id
        return True

    async def update_product(self, sku: str, changes: Mapping[str, Any]) -> Product | None:
        product = self.state.products.get(sku)
        if product is None:
            return None
        self.state.products[sku] = replace(product, **changes)
        return self.state.products[sku]


class MemoryWork:
    """The ERP's ``Work`` in memory: the platform's memory transaction and the ledger on its copy of the state."""

    def __init__(self, tx: MemoryTransaction[LedgerState]):
        self.tx = tx
        self.ledger = MemoryLedgerRepository(tx.state, tx.clock)
        self.emit, self.claim, self.record = tx.emit, tx.claim, tx.record


MemoryLedger = MemoryUnitOfWork[LedgerState, MemoryWork]


def memory_ledger(state: LedgerState | None = None, *, now: datetime | None = None) -> MemoryLedger:
    return MemoryUnitOfWork(state or LedgerState(), MemoryWork, now=now)
