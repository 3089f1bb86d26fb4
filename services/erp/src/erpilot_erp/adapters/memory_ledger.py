"""The ERP's ledger in memory (the ``Ledger`` of ``service_layer.ports``), for unit tests and anything
else that needs the commands without a database.

``MemoryLedger`` holds what is committed. A unit of work runs on a deep copy of it that replaces the
committed state only when the work returns, so a raise (a failpoint, a ``StaleWrite``) leaves nothing
behind, as the SQL rollback does. Units of work run one at a time (the SQL row locks serialise them).
The guards of ``apply_plan`` are the SQL adapter's: a lost race raises ``StaleWrite``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from erpilot_erp.adapters.repository import StaleWrite
from erpilot_erp.domain import reads
from erpilot_erp.domain.model import Customer, DraftRevision, Order, Product, Refund
from erpilot_erp.domain.plans import CommitPlan
from erpilot_erp.service_layer.ports import IdKind, OperationRecord

T = TypeVar("T")
PREFIXES = {"draft": "D", "order": "O", "refund": "R"}


@dataclass
class StoredDraft:
    session_id: str
    status: str
    revisions: dict[int, DraftRevision] = field(default_factory=dict)

    @property
    def latest_revision(self) -> int:
        return max(self.revisions)


@dataclass
class LedgerState:
    products: dict[str, Product] = field(default_factory=dict)
    customers: dict[str, Customer] = field(default_factory=dict)
    drafts: dict[str, StoredDraft] = field(default_factory=dict)
    orders: dict[str, Order] = field(default_factory=dict)
    refunds: dict[str, Refund] = field(default_factory=dict)
    operations: dict[str, OperationRecord] = field(default_factory=dict)
    consumed_grants: dict[str, str] = field(default_factory=dict)  # pending_id -> operation_id
    inbox: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    outbox: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)  # (subject, payload, msg_id)
    numbers: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PREFIXES, 0))
    revision_operations: dict[tuple[str, int], str] = field(default_factory=dict)  # -> operation_id


class MemoryLedgerRepository:
    def __init__(self, state: LedgerState):
        self.state = state

    async def next_id(self, kind: IdKind) -> str:
        self.state.numbers[kind] += 1
        return f"{PREFIXES[kind]}-{self.state.numbers[kind]}"

    async def customer(self, customer_id: str) -> Customer | None:
        return self.state.customers.get(customer_id)

    async def products_by_sku(self, skus: Iterable[str], *, lock: bool = False) -> dict[str, Product]:
        return {sku: self.state.products[sku] for sku in sorted(set(skus)) if sku in self.state.products}

    async def order(self, order_id: str, *, lock: bool = False) -> Order | None:
        return self.state.orders.get(order_id)

    async def latest_draft(self, draft_id: str, *, lock: bool = False) -> DraftRevision | None:
        draft = self.state.drafts.get(draft_id)
        if draft is None:
            return None
        return replace(draft.revisions[draft.latest_revision], session_id=draft.session_id,
                       status=draft.status)  # type: ignore[arg-type]

    async def insert_revision(self, revision: DraftRevision, *, operation_id: str) -> None:
        draft = self.state.drafts.get(revision.draft_id)
        if revision.revision == 1:
            if draft is not None:
                raise StaleWrite(f"draft {revision.draft_id} already exists")
            draft = self.state.drafts[revision.draft_id] = StoredDraft(revision.session_id, "open")
        elif draft is None or draft.latest_revision != revision.revision - 1:
            raise StaleWrite(f"draft {revision.draft_id} moved while locked")
        draft.revisions[revision.revision] = revision
        self.state.revision_operations[(revision.draft_id, revision.revision)] = operation_id

    async def apply_plan(self, plan: CommitPlan, *, operation_id: str, session_id: str) -> None:
        for change in plan.stock_changes:
            product = self.state.products.get(change.sku)
            if product is None or product.on_hand != change.before:
                raise StaleWrite(f"on-hand of {change.sku} is no longer {change.before}")
            self.state.products[change.sku] = replace(product, on_hand=change.after)
        if plan.new_order is not None:
            self.state.orders[plan.new_order.order_id] = plan.new_order
        if plan.updated_order is not None:
            old = self.state.orders[plan.updated_order.order_id]
            self.state.orders[old.order_id] = replace(old, status=plan.updated_order.status,
                                                      refunded_minor=plan.updated_order.refunded_minor)
        if plan.submitted_draft is not None:
            sub = plan.submitted_draft
            draft = self.state.drafts.get(sub.draft_id)
            if draft is None or draft.latest_revision != sub.revision or draft.status != "open":
                raise StaleWrite(f"draft {sub.draft_id} is no longer open at revision {sub.revision}")
            draft.status = "submitted"
        if plan.new_refund is not None:
            self.state.refunds[plan.new_refund.refund_id] = plan.new_refund

    async def operation(self, operation_id: str, *, lock: bool = False) -> OperationRecord | None:
        return self.state.operations.get(operation_id)

    async def insert_operation(self, **values: Any) -> None:
        if values["operation_id"] in self.state.operations:
            raise StaleWrite(f"operation {values['operation_id']} already exists")  # the primary key
        self.state.operations[values["operation_id"]] = OperationRecord(
            status="prepared", created_at=datetime.now(UTC), **values)

    async def finish_operation(self, operation_id: str, *, status: str, pending_id: str,
                               result: dict[str, Any] | None = None,
                               error: dict[str, Any] | None = None) -> OperationRecord:
        op = self.state.operations.get(operation_id)
        if op is None or op.status != "prepared":
            raise StaleWrite(f"operation {operation_id} was finished while locked")
        done = replace(op, status=status, result=result, error=error, grant_pending_id=pending_id,
                       committed_at=datetime.now(UTC) if status == "committed" else None)
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


class MemoryLedgerUnitOfWork:
    def __init__(self, state: LedgerState):
        self.state = state
        self.repo = MemoryLedgerRepository(state)

    async def claim(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        if key in self.state.inbox:
            return False, copy.deepcopy(self.state.inbox[key])
        self.state.inbox[key] = None
        return True, None

    async def record(self, key: str, response: dict[str, Any]) -> None:
        self.state.inbox[key] = copy.deepcopy(response)

    async def emit(self, subject: str, payload: BaseModel, *, msg_id: str) -> None:
        self.state.outbox.append((subject, payload.model_dump(mode="json"), msg_id))


class MemoryLedger:
    def __init__(self, state: LedgerState | None = None):
        self.state = state or LedgerState()
        self.commits = 0
        self.wakes = 0
        self._one_at_a_time = asyncio.Lock()

    async def run(self, work: Callable[[MemoryLedgerUnitOfWork], Awaitable[T]]) -> T:
        async with self._one_at_a_time:
            staged = copy.deepcopy(self.state)
            result = await work(MemoryLedgerUnitOfWork(staged))
            self.state = staged
            self.commits += 1
            return result

    def wake(self) -> None:
        self.wakes += 1


class MemoryLedgerReads:
    """``service_layer.ports.LedgerReads`` over what ``ledger`` has committed (``domain.reads`` semantics)."""

    def __init__(self, ledger: MemoryLedger):
        self.ledger = ledger

    async def search_customers(self, query: str) -> dict[str, Any]:
        return reads.search_customers(self.ledger.state.customers.values(), query)

    async def search_products(self, query: str) -> dict[str, Any]:
        return reads.search_products(self.ledger.state.products.values(), query)

    async def product(self, sku: str) -> dict[str, Any] | None:
        product = self.ledger.state.products.get(sku)
        return product.to_result() if product is not None else None

    async def order(self, order_id: str) -> dict[str, Any] | None:
        order = self.ledger.state.orders.get(order_id)
        return order.to_result() if order is not None else None

    async def draft_revision(self, draft_id: str, revision: int | None,
                             session_id: str | None) -> dict[str, Any] | None:
        draft = self.ledger.state.drafts.get(draft_id)
        if draft is None or (session_id is not None and draft.session_id != session_id):
            return None
        found = draft.revisions.get(revision or draft.latest_revision)
        if found is None:
            return None
        found = replace(found, session_id=draft.session_id, status=draft.status)  # type: ignore[arg-type]
        return {**found.to_result(), "latest_revision": draft.latest_revision}

    async def open_drafts(self, session_id: str) -> list[DraftRevision]:
        return [replace(d.revisions[d.latest_revision], session_id=session_id, status="open")  # type: ignore[arg-type]
                for d in self.ledger.state.drafts.values() if d.session_id == session_id and d.status == "open"]

    async def operation(self, operation_id: str) -> OperationRecord | None:
        return self.ledger.state.operations.get(operation_id)
