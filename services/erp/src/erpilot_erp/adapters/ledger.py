"""The ERP's ledger in PostgreSQL: the ``Work`` of ``service_layer.ports`` on ``erpilot_platform.uow``.

``bind`` turns the platform's ``Transaction`` (one connection, the outbox, the inbox) into the ERP's ``SqlWork``:
the same transaction plus ``SqlLedgerRepository`` on its connection (``adapters.repository``'s statements).
``ledger(engine)`` is the unit of work the ERP runs every command and read on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_erp.adapters import records, repository
from erpilot_erp.adapters.tables import ID_SEQUENCES, inbox, outbox
from erpilot_erp.domain.model import Customer, DraftRevision, Order, Product
from erpilot_erp.domain.plans import CommitPlan, Rows
from erpilot_erp.service_layer.ports import IdKind, NewOperation, OperationRecord, Outcome, StoredRevision
from erpilot_platform import advisory_locks
from erpilot_platform.inbox import Inbox
from erpilot_platform.outbox import Outbox
from erpilot_platform.uow import Transaction, UnitOfWork

_ID_SEQUENCES = {**ID_SEQUENCES, **records.ID_SEQUENCES}
"""Every id kind: the core's and each record kind's (``adapters.records``)."""
_OPERATION_FIELDS = [f.name for f in fields(OperationRecord)]


def operation_record(row: Any) -> OperationRecord:
    return OperationRecord(**{name: getattr(row, name) for name in _OPERATION_FIELDS})


class SqlLedgerRepository:
    def __init__(self, conn: AsyncConnection):
        self.conn = conn

    async def next_id(self, kind: IdKind) -> str:
        return await repository.next_id(self.conn, *_ID_SEQUENCES[kind])

    async def customer(self, customer_id: str) -> Customer | None:
        return await repository.customer(self.conn, customer_id)

    async def products_by_sku(self, skus: Iterable[str], *, lock: bool = False) -> dict[str, Product]:
        return await repository.products_by_sku(self.conn, skus, lock=lock)

    async def search_products(self, query: str) -> list[Product]:
        return await repository.search_products(self.conn, query)

    async def search_customers(self, query: str) -> list[Customer]:
        return await repository.search_customers(self.conn, query)

    async def latest_draft(self, draft_id: str, *, lock: bool = False) -> DraftRevision | None:
        return await repository.latest_draft(self.conn, draft_id, lock=lock)

    async def draft_revision(self, draft_id: str, revision: int | None) -> StoredRevision | None:
        return await repository.draft_revision(self.conn, draft_id, revision)

    async def open_drafts(self, session_id: str) -> list[DraftRevision]:
        return await repository.open_drafts(self.conn, session_id)

    async def insert_revision(self, revision: DraftRevision, *, operation_id: str) -> None:
        await repository.insert_revision(self.conn, revision, operation_id=operation_id)

    async def order(self, order_id: str, *, lock: bool = False) -> Order | None:
        return await repository.order(self.conn, order_id, lock=lock)

    async def row_set(self, kind: Rows, key: str) -> list[Any]:
        return await records.ROW_SETS[kind](self.conn, key)

    async def apply_plan(self, plan: CommitPlan, *, operation_id: str) -> None:
        await repository.apply_plan(self.conn, plan, operation_id=operation_id)

    async def operation(self, operation_id: str, *, lock: bool = False) -> OperationRecord | None:
        row = await repository.operation(self.conn, operation_id, lock=lock)
        return operation_record(row) if row is not None else None

    async def operation_for_call(self, session_id: str, call_id: str) -> OperationRecord | None:
        row = await repository.operation_for_call(self.conn, session_id, call_id)
        return operation_record(row) if row is not None else None

    async def insert_operation(self, operation: NewOperation) -> OperationRecord:
        return operation_record(await repository.insert_operation(self.conn, asdict(operation)))

    async def finish_operation(self, operation_id: str, outcome: Outcome) -> OperationRecord:
        return operation_record(await repository.finish_operation(
            self.conn, operation_id, status=outcome.status, pending_id=outcome.pending_id,
            decided_by=outcome.decided_by, result=outcome.result, error=outcome.error))

    async def consume_grant(self, pending_id: str, operation_id: str) -> bool:
        return await repository.consume_grant(self.conn, pending_id, operation_id)

    async def update_product(self, sku: str, changes: Mapping[str, Any]) -> Product | None:
        return await repository.update_product(self.conn, sku, changes)


class SqlWork:
    """The ERP's ``Work`` in PostgreSQL: the platform's transaction and the ledger on its connection."""

    def __init__(self, tx: Transaction):
        self.tx = tx
        self.ledger = SqlLedgerRepository(tx.conn)
        self.emit, self.claim, self.record = tx.emit, tx.claim, tx.record


def ledger(engine: AsyncEngine) -> UnitOfWork[SqlWork]:
    """The ERP's unit of work: its ledger, its inbox (answers of handled commands) and its outbox."""
    return UnitOfWork(engine, SqlWork, outbox=Outbox(outbox, lock_key=advisory_locks.ERP_OUTBOX), inbox=Inbox(inbox))
