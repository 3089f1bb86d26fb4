"""Read-side queries: rows in, SPEC §2 result shapes (the domain's ``to_result()``) out; ``SqlLedgerReads``
is the read port (``service_layer.ports.LedgerReads``) over them.

Searching runs in SQL with the semantics of ``domain.reads``: a case-insensitive substring of the id or
the name, surrounding blanks ignored, ordered by id, at most ``MAX_SEARCH_RESULTS`` items.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_erp.adapters import repository, rows
from erpilot_erp.adapters.ledger import operation_record
from erpilot_erp.adapters.tables import customers, draft_revisions, drafts, orders, products
from erpilot_erp.domain.model import DraftRevision
from erpilot_erp.domain.reads import MAX_SEARCH_RESULTS
from erpilot_erp.service_layer.ports import OperationRecord


def _like(query: str) -> str:
    escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def search_customers(conn: AsyncConnection, query: str) -> dict[str, Any]:
    stmt = select(customers).order_by(customers.c.customer_id).limit(MAX_SEARCH_RESULTS)
    if needle := query.strip():
        stmt = stmt.where(or_(customers.c.customer_id.ilike(_like(needle)), customers.c.name.ilike(_like(needle))))
    return {"items": [rows.customer(r).to_result() for r in (await conn.execute(stmt)).all()]}


async def search_products(conn: AsyncConnection, query: str) -> dict[str, Any]:
    stmt = select(products).order_by(products.c.sku).limit(MAX_SEARCH_RESULTS)
    if needle := query.strip():
        stmt = stmt.where(or_(products.c.sku.ilike(_like(needle)), products.c.name.ilike(_like(needle))))
    return {"items": [rows.product(r).to_result() for r in (await conn.execute(stmt)).all()]}


async def get_product(conn: AsyncConnection, sku: str) -> dict[str, Any] | None:
    row = (await conn.execute(select(products).where(products.c.sku == sku))).first()
    return rows.product(row).to_result() if row else None


async def get_order(conn: AsyncConnection, order_id: str) -> dict[str, Any] | None:
    row = (await conn.execute(select(orders).where(orders.c.order_id == order_id))).first()
    return rows.order(row).to_result() if row else None


async def get_draft_revision(conn: AsyncConnection, draft_id: str, revision: int | None,
                             session_id: str | None) -> dict[str, Any] | None:
    """A draft revision; ``session_id`` restricts it to its owning session (None: back-office view)."""
    draft = (await conn.execute(select(drafts).where(drafts.c.draft_id == draft_id))).first()
    if draft is None or (session_id is not None and draft.session_id != session_id):
        return None
    wanted = revision or draft.latest_revision
    snapshot = await conn.scalar(select(draft_revisions.c.snapshot).where(
        draft_revisions.c.draft_id == draft_id, draft_revisions.c.revision == wanted))
    if snapshot is None:
        return None
    found = rows.revision(snapshot, session_id=draft.session_id, status=draft.status)
    return {**found.to_result(), "latest_revision": draft.latest_revision}


class SqlLedgerReads:
    """``service_layer.ports.LedgerReads`` in PostgreSQL: each read on its own connection, outside a transaction
    (no BEGIN, no ROLLBACK: two round trips fewer). Each is one statement, consistent on its own, except
    ``draft_revision``, whose second statement reads a revision row, which is never changed once written."""

    def __init__(self, engine: AsyncEngine):
        self.engine = engine.execution_options(isolation_level="AUTOCOMMIT")  # the same pool

    async def search_customers(self, query: str) -> dict[str, Any]:
        async with self.engine.connect() as conn:
            return await search_customers(conn, query)

    async def search_products(self, query: str) -> dict[str, Any]:
        async with self.engine.connect() as conn:
            return await search_products(conn, query)

    async def product(self, sku: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            return await get_product(conn, sku)

    async def order(self, order_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            return await get_order(conn, order_id)

    async def draft_revision(self, draft_id: str, revision: int | None,
                             session_id: str | None) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            return await get_draft_revision(conn, draft_id, revision, session_id)

    async def open_drafts(self, session_id: str) -> list[DraftRevision]:
        async with self.engine.connect() as conn:
            return await repository.open_drafts(conn, session_id)

    async def operation(self, operation_id: str) -> OperationRecord | None:
        async with self.engine.connect() as conn:
            row = await repository.operation(conn, operation_id)
        return operation_record(row) if row is not None else None
