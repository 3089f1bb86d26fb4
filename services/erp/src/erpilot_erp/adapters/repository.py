"""Loading domain values by key (optionally locked FOR UPDATE) and storing what the domain returns.

Lock order, everywhere: operation row -> draft or order row -> product rows in SKU order. Keeping one
order is what makes concurrent commits deadlock-free.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Sequence, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_erp.adapters import records, rows, sql
from erpilot_erp.adapters.tables import (
    customers,
    draft_revisions,
    drafts,
    operations,
    orders,
    products,
    refunds,
)
from erpilot_erp.domain.model import Customer, DraftRevision, Order, Product
from erpilot_erp.domain.plans import (
    CommitPlan,
    DraftSubmission,
    Effect,
    NewOrder,
    NewRefund,
    OrderChange,
    StockChange,
)
from erpilot_erp.domain.reads import MAX_SEARCH_RESULTS
from erpilot_erp.service_layer.ports import StoredRevision
from erpilot_platform import raw_sql
from erpilot_platform.db import Fields, driver_connection, fields

REVISION_MAX = 2**31 - 1  # draft_revisions.revision is an INTEGER column


class StaleWrite(RuntimeError):
    """A guarded UPDATE matched no row although its row was locked: a bug, never a business outcome."""


async def next_id(conn: AsyncConnection, sequence: Sequence, prefix: str) -> str:
    return f"{prefix}-{await (await driver_connection(conn)).fetchval(sql.next_value(sequence))}"


# --- catalog -----------------------------------------------------------------------------------------
# The statements every draft, prepare and commit runs go straight to asyncpg (``sql``): SQLAlchemy's statement
# building, execution context and result processing cost more CPU than the round trip (the ERP's profile
# under ``erpilot bench``).


async def products_by_sku(conn: AsyncConnection, skus: Iterable[str], *, lock: bool = False) -> dict[str, Product]:
    wanted = sorted(set(skus))
    if not wanted:
        return {}
    found = await (await driver_connection(conn)).fetch(sql.PRODUCTS_LOCKED if lock else sql.PRODUCTS, wanted)
    return {row["sku"]: rows.product(Fields(row)) for row in found}


async def customer(conn: AsyncConnection, customer_id: str) -> Customer | None:
    row = await (await driver_connection(conn)).fetchrow(sql.CUSTOMER, customer_id)
    return rows.customer(Fields(row)) if row else None


async def update_product(conn: AsyncConnection, sku: str, changes: Mapping[str, Any]) -> Product | None:
    row = (await conn.execute(
        update(products).where(products.c.sku == sku).values(**changes, updated_at=func.now())
        .returning(*products.c))).first()
    return rows.product(row) if row else None


async def order(conn: AsyncConnection, order_id: str, *, lock: bool = False) -> Order | None:
    stmt = select(orders).where(orders.c.order_id == order_id)
    row = (await conn.execute(stmt.with_for_update() if lock else stmt)).first()
    return rows.order(row) if row else None


# --- drafts ------------------------------------------------------------------------------------------
async def latest_draft(conn: AsyncConnection, draft_id: str, *, lock: bool = False) -> DraftRevision | None:
    """The draft's latest revision; ``lock`` holds the draft row until the transaction ends."""
    raw = await driver_connection(conn)
    if not lock:  # one snapshot sees the draft and its latest revision together: one statement
        row = await raw.fetchrow(sql.LATEST_DRAFT, draft_id)
        if row is None:
            return None
        return rows.revision(row["snapshot"], session_id=row["session_id"], status=row["status"], owner=row["owner"])
    # Locked: the revision is read after the lock. A join FOR UPDATE would re-check a draft that moved on
    # while it waited against the revision row of the old snapshot, and find nothing.
    draft = await raw.fetchrow(sql.LOCK_DRAFT, draft_id)
    if draft is None:
        return None
    snapshot = await raw.fetchval(sql.REVISION_SNAPSHOT, draft_id, draft["latest_revision"])
    return rows.revision(snapshot, session_id=draft["session_id"], status=draft["status"], owner=draft["owner"])


async def open_drafts(conn: AsyncConnection, session_id: str) -> list[DraftRevision]:
    """The latest revision of every open draft of one session."""
    stmt = (
        select(draft_revisions.c.snapshot, drafts.c.owner)
        .join(drafts, (drafts.c.draft_id == draft_revisions.c.draft_id)
              & (drafts.c.latest_revision == draft_revisions.c.revision))
        .where(drafts.c.session_id == session_id, drafts.c.status == "open")
    )
    return [rows.revision(r.snapshot, session_id=session_id, status="open", owner=r.owner)
            for r in (await conn.execute(stmt)).all()]


async def insert_revision(conn: AsyncConnection, revision: DraftRevision, *, operation_id: str) -> None:
    """Store a new draft (revision 1) or a draft's next revision, and make it the latest."""
    raw = await driver_connection(conn)
    if revision.revision == 1:
        await raw.execute(sql.NEW_DRAFT, revision.draft_id, revision.session_id, revision.owner)
    elif await raw.fetchval(sql.MOVE_DRAFT, revision.draft_id, revision.revision) is None:
        raise StaleWrite(f"draft {revision.draft_id} moved while locked")
    await raw.execute(sql.INSERT_REVISION, revision.draft_id, revision.revision,
                      json.dumps(rows.revision_snapshot(revision)), operation_id, revision.created_at)


# --- commit effects ----------------------------------------------------------------------------------
async def _move_stock(conn: AsyncConnection, change: StockChange, operation_id: str) -> None:
    moved = await (await driver_connection(conn)).execute(sql.MOVE_STOCK, change.sku, change.before, change.after)
    if moved != "UPDATE 1":  # asyncpg's status of the statement: the rows it changed
        raise StaleWrite(f"on-hand of {change.sku} is no longer {change.before}")


async def _insert_order(conn: AsyncConnection, effect: NewOrder, operation_id: str) -> None:
    await (await driver_connection(conn)).execute(
        sql.INSERT_ORDER, *raw_sql.values(orders, sql.ORDER_COLUMNS, rows.order_values(effect.order)))


async def _change_order(conn: AsyncConnection, effect: OrderChange, operation_id: str) -> None:
    await conn.execute(update(orders).where(orders.c.order_id == effect.order.order_id).values(
        status=effect.order.status, refunded_minor=effect.order.refunded_minor))


async def _submit_draft(conn: AsyncConnection, sub: DraftSubmission, operation_id: str) -> None:
    moved = await (await driver_connection(conn)).execute(sql.SUBMIT_DRAFT, sub.draft_id, sub.revision)
    if moved != "UPDATE 1":
        raise StaleWrite(f"draft {sub.draft_id} is no longer open at revision {sub.revision}")


async def _insert_refund(conn: AsyncConnection, effect: NewRefund, operation_id: str) -> None:
    await conn.execute(refunds.insert().values(rows.refund_values(effect.refund, operation_id=operation_id)))


_APPLY: dict[type[Effect], Any] = {
    StockChange: _move_stock, NewOrder: _insert_order, OrderChange: _change_order, DraftSubmission: _submit_draft,
    NewRefund: _insert_refund,
}
"""How each type of effect is written (a guarded UPDATE turns a lost race into ``StaleWrite``, not a wrong write):
the core's here, a record kind's by its module in ``adapters.records``."""
for _kind, _apply in _APPLY.items():
    records.applies(_kind)(_apply)


async def apply_plan(conn: AsyncConnection, plan: CommitPlan, *, operation_id: str) -> None:
    """Every effect of a commit, in the plan's order, each by its type."""
    for effect in plan.effects:
        await records.APPLIERS[type(effect)](conn, effect, operation_id)


# --- operations and grants ---------------------------------------------------------------------------
async def operation(conn: AsyncConnection, operation_id: str, *, lock: bool = False) -> Any | None:
    raw = await driver_connection(conn)
    return fields(await raw.fetchrow(sql.LOCK_OPERATION if lock else sql.OPERATION, operation_id))


async def operation_for_call(conn: AsyncConnection, session_id: str, call_id: str) -> Any | None:
    return fields(await (await driver_connection(conn)).fetchrow(sql.OPERATION_FOR_CALL, session_id, call_id))


async def insert_operation(conn: AsyncConnection, values: Mapping[str, Any]) -> Any:
    """Store a prepared operation; returns its row."""
    names = tuple(sorted(values))  # one statement text per set of columns
    raw = await driver_connection(conn)
    return fields(await raw.fetchrow(sql.insert_operation(names), *raw_sql.values(operations, names, values)))


async def finish_operation(conn: AsyncConnection, operation_id: str, *, status: str, pending_id: str,
                           decided_by: str, result: dict[str, Any] | None = None,
                           error: dict[str, Any] | None = None) -> Any:
    """Record the outcome of a commit; returns the updated row."""
    raw = await driver_connection(conn)
    row = fields(await raw.fetchrow(sql.FINISH_OPERATION, operation_id, status, json.dumps(result), json.dumps(error),
                                    pending_id, decided_by, status == "committed"))
    if row is None:
        raise StaleWrite(f"operation {operation_id} was finished while locked")
    return row


async def consume_grant(conn: AsyncConnection, pending_id: str, operation_id: str) -> bool:
    """Mark the grant used; False when it already was (by this or another operation)."""
    return await (await driver_connection(conn)).fetchval(sql.CONSUME_GRANT, pending_id, operation_id) is not None


# --- reads (each one statement: in a read unit of work it needs no transaction) ----------------------
def _like(query: str) -> str:
    escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def search_customers(conn: AsyncConnection, query: str) -> list[Customer]:
    """Customers whose id or name contains ``query`` (case-insensitive, blanks around it ignored), by id."""
    stmt = select(customers).order_by(customers.c.customer_id).limit(MAX_SEARCH_RESULTS)
    if needle := query.strip():
        stmt = stmt.where(or_(customers.c.customer_id.ilike(_like(needle)), customers.c.name.ilike(_like(needle))))
    return [rows.customer(r) for r in (await conn.execute(stmt)).all()]


async def search_products(conn: AsyncConnection, query: str) -> list[Product]:
    """Products whose SKU or name contains ``query`` (case-insensitive, blanks around it ignored), by SKU."""
    stmt = select(products).order_by(products.c.sku).limit(MAX_SEARCH_RESULTS)
    if needle := query.strip():
        stmt = stmt.where(or_(products.c.sku.ilike(_like(needle)), products.c.name.ilike(_like(needle))))
    return [rows.product(r) for r in (await conn.execute(stmt)).all()]


async def draft_revision(conn: AsyncConnection, draft_id: str, revision: int | None) -> StoredRevision | None:
    """One revision of a draft (None: the latest) with the draft's session, status and latest revision."""
    if revision is not None and not 0 < revision <= REVISION_MAX:
        return None  # no such revision can exist (and PostgreSQL would refuse the comparison with an error)
    wanted = draft_revisions.c.revision == (revision if revision is not None else drafts.c.latest_revision)
    row = (await conn.execute(
        select(drafts.c.session_id, drafts.c.status, drafts.c.owner, drafts.c.latest_revision,
               draft_revisions.c.snapshot)
        .join(draft_revisions, (draft_revisions.c.draft_id == drafts.c.draft_id) & wanted)
        .where(drafts.c.draft_id == draft_id))).first()
    if row is None:
        return None
    return StoredRevision(rows.revision(row.snapshot, session_id=row.session_id, status=row.status, owner=row.owner),
                          row.latest_revision)
