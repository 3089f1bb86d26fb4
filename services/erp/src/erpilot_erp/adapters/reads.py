"""Read-side queries: rows in, SPEC §2 result shapes out."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_erp.adapters.tables import customers, draft_revisions, drafts, orders, products

SEARCH_LIMIT = 50


def product_result(row: Any) -> dict[str, Any]:
    return {"sku": row.sku, "name": row.name, "status": row.status, "price_minor": row.price_minor,
            "currency": row.currency, "on_hand": row.on_hand}


def customer_result(row: Any) -> dict[str, Any]:
    return {"customer_id": row.customer_id, "name": row.name, "discount_pct": row.discount_pct}


def order_result(row: Any) -> dict[str, Any]:
    return {
        "order_id": row.order_id, "status": row.status, "customer_id": row.customer_id,
        "customer_name": row.customer_name, "lines": row.lines, "total_amount_minor": row.total_amount_minor,
        "currency": row.currency, "paid_minor": row.paid_minor, "refunded_minor": row.refunded_minor,
        "draft_id": row.draft_id, "revision": row.revision, "created_at": row.created_at.isoformat(),
    }


def _like(query: str) -> str:
    escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def search_customers(conn: AsyncConnection, query: str) -> dict[str, Any]:
    stmt = select(customers).order_by(customers.c.customer_id).limit(SEARCH_LIMIT)
    if query:
        stmt = stmt.where(or_(customers.c.customer_id.ilike(_like(query)), customers.c.name.ilike(_like(query))))
    return {"items": [customer_result(r) for r in (await conn.execute(stmt)).all()]}


async def search_products(conn: AsyncConnection, query: str) -> dict[str, Any]:
    stmt = select(products).order_by(products.c.sku).limit(SEARCH_LIMIT)
    if query:
        stmt = stmt.where(or_(products.c.sku.ilike(_like(query)), products.c.name.ilike(_like(query))))
    return {"items": [product_result(r) for r in (await conn.execute(stmt)).all()]}


async def get_product(conn: AsyncConnection, sku: str) -> dict[str, Any] | None:
    row = (await conn.execute(select(products).where(products.c.sku == sku))).first()
    return product_result(row) if row else None


async def get_order(conn: AsyncConnection, order_id: str) -> dict[str, Any] | None:
    row = (await conn.execute(select(orders).where(orders.c.order_id == order_id))).first()
    return order_result(row) if row else None


async def get_draft_revision(conn: AsyncConnection, draft_id: str, revision: int | None,
                             session_id: str | None) -> dict[str, Any] | None:
    """A draft revision; ``session_id`` restricts it to its owning session (None: back-office view)."""
    draft = (await conn.execute(select(drafts).where(drafts.c.draft_id == draft_id))).first()
    if draft is None or (session_id is not None and draft.session_id != session_id):
        return None
    wanted = revision or draft.latest_revision
    row = (await conn.execute(select(draft_revisions.c.snapshot).where(
        draft_revisions.c.draft_id == draft_id, draft_revisions.c.revision == wanted))).first()
    if row is None:
        return None
    return {**row.snapshot, "status": draft.status, "latest_revision": draft.latest_revision}


async def open_draft_candidates(conn: AsyncConnection, session_id: str) -> list[dict[str, Any]]:
    """The latest revision of every open draft of a session, oldest first."""
    stmt = (
        select(draft_revisions.c.snapshot)
        .join(drafts, (drafts.c.draft_id == draft_revisions.c.draft_id)
              & (drafts.c.latest_revision == draft_revisions.c.revision))
        .where(drafts.c.session_id == session_id, drafts.c.status == "open")
        .order_by(drafts.c.created_at, drafts.c.draft_id)
    )
    return [{**r.snapshot, "status": "open"} for r in (await conn.execute(stmt)).all()]


async def count_rows(conn: AsyncConnection) -> dict[str, int]:
    result = {}
    for table in (customers, products, orders):
        result[table.name] = await conn.scalar(select(func.count()).select_from(table))
    return result

