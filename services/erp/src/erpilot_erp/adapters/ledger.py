"""The ERP's ledger in PostgreSQL (the ``Ledger`` of ``service_layer.ports``).

One unit of work is one transaction on one connection (``run_in_transaction``: retried on a
serialization failure or deadlock); the repository is ``adapters.repository`` bound to that connection,
the inbox and outbox are the service's ``inbox`` and ``outbox`` tables.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import fields
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_erp.adapters import repository
from erpilot_erp.adapters.tables import draft_numbers, order_numbers, refund_numbers
from erpilot_erp.domain.model import Customer, DraftRevision, Order, Product
from erpilot_erp.domain.plans import CommitPlan
from erpilot_erp.service_layer.ports import IdKind, OperationRecord
from erpilot_platform.db import run_in_transaction
from erpilot_platform.inbox import Inbox
from erpilot_platform.outbox import Outbox

T = TypeVar("T")
SEQUENCES = {"draft": (draft_numbers, "D"), "order": (order_numbers, "O"), "refund": (refund_numbers, "R")}
_OPERATION_FIELDS = [f.name for f in fields(OperationRecord)]


def operation_record(row: Any) -> OperationRecord:
    return OperationRecord(**{name: getattr(row, name) for name in _OPERATION_FIELDS})


class SqlLedgerRepository:
    def __init__(self, conn: AsyncConnection):
        self.conn = conn

    async def next_id(self, kind: IdKind) -> str:
        return await repository.next_id(self.conn, *SEQUENCES[kind])

    async def customer(self, customer_id: str) -> Customer | None:
        return await repository.customer(self.conn, customer_id)

    async def products_by_sku(self, skus: Iterable[str], *, lock: bool = False) -> dict[str, Product]:
        return await repository.products_by_sku(self.conn, skus, lock=lock)

    async def latest_draft(self, draft_id: str, *, lock: bool = False) -> DraftRevision | None:
        return await repository.latest_draft(self.conn, draft_id, lock=lock)

    async def insert_revision(self, revision: DraftRevision, *, operation_id: str) -> None:
        await repository.insert_revision(self.conn, revision, operation_id=operation_id)

    async def order(self, order_id: str, *, lock: bool = False) -> Order | None:
        return await repository.order(self.conn, order_id, lock=lock)

    async def apply_plan(self, plan: CommitPlan, *, operation_id: str, session_id: str) -> None:
        await repository.apply_plan(self.conn, plan, operation_id=operation_id, session_id=session_id)

    async def operation(self, operation_id: str, *, lock: bool = False) -> OperationRecord | None:
        row = await repository.operation(self.conn, operation_id, lock=lock)
        return operation_record(row) if row is not None else None

    async def insert_operation(self, **values: Any) -> None:
        await repository.insert_operation(self.conn, **values)

    async def finish_operation(self, operation_id: str, *, status: str, pending_id: str,
                               result: dict[str, Any] | None = None,
                               error: dict[str, Any] | None = None) -> OperationRecord:
        return operation_record(await repository.finish_operation(
            self.conn, operation_id, status=status, pending_id=pending_id, result=result, error=error))

    async def consume_grant(self, pending_id: str, operation_id: str) -> bool:
        return await repository.consume_grant(self.conn, pending_id, operation_id)

    async def update_product(self, sku: str, changes: Mapping[str, Any]) -> Product | None:
        return await repository.update_product(self.conn, sku, changes)


class SqlLedgerUnitOfWork:
    def __init__(self, conn: AsyncConnection, inbox: Inbox, outbox: Outbox):
        self.conn, self.inbox, self.outbox = conn, inbox, outbox
        self.repo = SqlLedgerRepository(conn)

    async def claim(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        return await self.inbox.claim(self.conn, key)

    async def record(self, key: str, response: dict[str, Any]) -> None:
        await self.inbox.record(self.conn, key, response)

    async def emit(self, subject: str, payload: BaseModel, *, msg_id: str) -> None:
        await self.outbox.add(self.conn, subject, payload, msg_id=msg_id)


class SqlLedger:
    def __init__(self, engine: AsyncEngine, inbox: Inbox, outbox: Outbox):
        self.engine, self.inbox, self.outbox = engine, inbox, outbox

    async def run(self, work: Callable[[SqlLedgerUnitOfWork], Awaitable[T]]) -> T:
        return await run_in_transaction(
            self.engine, lambda conn: work(SqlLedgerUnitOfWork(conn, self.inbox, self.outbox)))

    def wake(self) -> None:
        self.outbox.wake()
