"""Loading domain values by key (optionally locked FOR UPDATE) and storing what the domain returns.

Lock order, everywhere: operation row -> draft or order row -> product rows in SKU order. Keeping one
order is what makes concurrent commits deadlock-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Sequence, bindparam, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_erp.adapters import records, rows
from erpilot_erp.adapters.tables import (
    consumed_grants,
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

REVISION_MAX = 2**31 - 1  # draft_revisions.revision is an INTEGER column


class StaleWrite(RuntimeError):
    """A guarded UPDATE matched no row although its row was locked: a bug, never a business outcome."""


async def next_id(conn: AsyncConnection, sequence: Sequence, prefix: str) -> str:
    return f"{prefix}-{await conn.scalar(sequence.next_value())}"


# --- catalog -----------------------------------------------------------------------------------------
# The statements every prepare and commit runs, built once with bind parameters: building a statement and
# its cache key per execution cost more CPU than running it (the ERP's profile under ``erpilot bench``).
_PRODUCTS = select(products).where(products.c.sku.in_(bindparam("skus", expanding=True))).order_by(products.c.sku)
_PRODUCTS_LOCKED = _PRODUCTS.with_for_update()  # LockRows sits above the sort: rows are locked in SKU order
_CUSTOMER = select(customers).where(customers.c.customer_id == bindparam("customer_id"))
# (An UPDATE's bind parameters are not named after its table's columns: SQLAlchemy keeps those for SET.)
_MOVE_STOCK = update(products).where(products.c.sku == bindparam("p_sku"), products.c.on_hand == bindparam("p_before")
                                     ).values(on_hand=bindparam("p_after"), updated_at=func.now())
_SUBMIT_DRAFT = update(drafts).where(
    drafts.c.draft_id == bindparam("p_draft_id"), drafts.c.latest_revision == bindparam("p_revision"),
    drafts.c.status == "open").values(status="submitted")


async def products_by_sku(conn: AsyncConnection, skus: Iterable[str], *, lock: bool = False) -> dict[str, Product]:
    wanted = sorted(set(skus))
    if not wanted:
        return {}
    stmt = _PRODUCTS_LOCKED if lock else _PRODUCTS
    return {row.sku: rows.product(row) for row in (await conn.execute(stmt, {"skus": wanted})).all()}


async def customer(conn: AsyncConnection, customer_id: str) -> Customer | None:
    row = (await conn.execute(_CUSTOMER, {"customer_id": customer_id})).first()
    return rows.customer(row) if row else None


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
    if not lock:  # one snapshot sees the draft and its latest revision together: one statement
        row = (await conn.execute(
            select(drafts.c.session_id, drafts.c.status, drafts.c.owner, draft_revisions.c.snapshot)
            .join(draft_revisions, (draft_revisions.c.draft_id == drafts.c.draft_id)
                  & (draft_revisions.c.revision == drafts.c.latest_revision))
            .where(drafts.c.draft_id == draft_id))).first()
        if row is None:
            return None
        return rows.revision(row.snapshot, session_id=row.session_id, status=row.status, owner=row.owner)
    # Locked: the revision is read after the lock. A join FOR UPDATE would re-check a draft that moved on
    # while it waited against the revision row of the old snapshot, and find nothing.
    draft = (await conn.execute(select(drafts).where(drafts.c.draft_id == draft_id).with_for_update())).first()
    if draft is None:
        return None
    snapshot = await conn.scalar(select(draft_revisions.c.snapshot).where(
        draft_revisions.c.draft_id == draft_id, draft_revisions.c.revision == draft.latest_revision))
    return rows.revision(snapshot, session_id=draft.session_id, status=draft.status, owner=draft.owner)


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
    if revision.revision == 1:
        await conn.execute(drafts.insert().values(
            draft_id=revision.draft_id, session_id=revision.session_id, owner=revision.owner, latest_revision=1,
            status="open"))
    else:
        moved = await conn.execute(update(drafts).where(
            drafts.c.draft_id == revision.draft_id, drafts.c.latest_revision == revision.revision - 1,
        ).values(latest_revision=revision.revision))
        if moved.rowcount != 1:
            raise StaleWrite(f"draft {revision.draft_id} moved while locked")
    await conn.execute(draft_revisions.insert().values(
        draft_id=revision.draft_id, revision=revision.revision, snapshot=rows.revision_snapshot(revision),
        operation_id=operation_id, created_at=revision.created_at))


# --- commit effects ----------------------------------------------------------------------------------
async def _move_stock(conn: AsyncConnection, change: StockChange, operation_id: str) -> None:
    moved = await conn.execute(_MOVE_STOCK, {"p_sku": change.sku, "p_before": change.before, "p_after": change.after})
    if moved.rowcount != 1:
        raise StaleWrite(f"on-hand of {change.sku} is no longer {change.before}")


async def _insert_order(conn: AsyncConnection, effect: NewOrder, operation_id: str) -> None:
    await conn.execute(orders.insert().values(rows.order_values(effect.order)))


async def _change_order(conn: AsyncConnection, effect: OrderChange, operation_id: str) -> None:
    await conn.execute(update(orders).where(orders.c.order_id == effect.order.order_id).values(
        status=effect.order.status, refunded_minor=effect.order.refunded_minor))


async def _submit_draft(conn: AsyncConnection, sub: DraftSubmission, operation_id: str) -> None:
    moved = await conn.execute(_SUBMIT_DRAFT, {"p_draft_id": sub.draft_id, "p_revision": sub.revision})
    if moved.rowcount != 1:
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
    stmt = select(operations).where(operations.c.operation_id == operation_id)
    return (await conn.execute(stmt.with_for_update() if lock else stmt)).first()


async def operation_for_call(conn: AsyncConnection, session_id: str, call_id: str) -> Any | None:
    stmt = select(operations).where(operations.c.session_id == session_id, operations.c.call_id == call_id,
                                    operations.c.supersedes.is_(None))
    return (await conn.execute(stmt)).first()


async def insert_operation(conn: AsyncConnection, values: Mapping[str, Any]) -> Any:
    """Store a prepared operation; returns its row."""
    stmt = operations.insert().values(status="prepared", **values).returning(*operations.c)
    return (await conn.execute(stmt)).first()


async def finish_operation(conn: AsyncConnection, operation_id: str, *, status: str, pending_id: str,
                           decided_by: str, result: dict[str, Any] | None = None,
                           error: dict[str, Any] | None = None) -> Any:
    """Record the outcome of a commit; returns the updated row."""
    stmt = (update(operations).where(operations.c.operation_id == operation_id, operations.c.status == "prepared")
            .values(status=status, result=result, error=error, grant_pending_id=pending_id, decided_by=decided_by,
                    committed_at=func.now() if status == "committed" else None)
            .returning(*operations.c))
    row = (await conn.execute(stmt)).first()
    if row is None:
        raise StaleWrite(f"operation {operation_id} was finished while locked")
    return row


async def consume_grant(conn: AsyncConnection, pending_id: str, operation_id: str) -> bool:
    """Mark the grant used; False when it already was (by this or another operation)."""
    stmt = (insert(consumed_grants).values(pending_id=pending_id, operation_id=operation_id)
            .on_conflict_do_nothing().returning(consumed_grants.c.pending_id))
    return (await conn.execute(stmt)).first() is not None


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
