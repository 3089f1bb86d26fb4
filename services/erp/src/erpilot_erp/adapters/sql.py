"""The SQL of the ERP's hot statements (a draft, a prepare, a commit), run straight on asyncpg
(``erpilot_platform.db.driver_connection``, issue 31 item 4): asyncpg prepares each text once per connection, so
every text here is a constant (or built once per shape, ``functools.cache``). Columns come from ``tables``; JSON
values go as text (``erpilot_platform.raw_sql.values``) and come back parsed. ``repository`` runs them;
SQLAlchemy keeps the cold ones."""

from __future__ import annotations

import functools

from sqlalchemy import Sequence

from erpilot_erp.adapters.tables import (
    consumed_grants,
    customers,
    draft_revisions,
    drafts,
    operations,
    orders,
    products,
)
from erpilot_platform.raw_sql import column_names, columns


def next_value(sequence: Sequence) -> str:
    return f"SELECT nextval('{sequence.schema}.{sequence.name}')"


# Locked in SKU order (the lock order everywhere: operation, draft or order, products by SKU).
PRODUCTS = f"SELECT {columns(products)} FROM {products.fullname} WHERE sku = ANY($1::text[]) ORDER BY sku"
PRODUCTS_LOCKED = PRODUCTS + " FOR UPDATE"
CUSTOMER = f"SELECT {columns(customers)} FROM {customers.fullname} WHERE customer_id = $1"
# A guarded change: ``$1`` the SKU, ``$2`` the on-hand it was read with under its lock, ``$3`` the new one.
MOVE_STOCK = f"UPDATE {products.fullname} SET on_hand = $3, updated_at = now() WHERE sku = $1 AND on_hand = $2"
SUBMIT_DRAFT = (f"UPDATE {drafts.fullname} SET status = 'submitted' "
                "WHERE draft_id = $1 AND latest_revision = $2 AND status = 'open'")

# A draft's latest revision in one snapshot (unlocked), or the draft row locked and then its revision.
LATEST_DRAFT = (f"SELECT d.session_id, d.status, d.owner, r.snapshot FROM {drafts.fullname} d "
                f"JOIN {draft_revisions.fullname} r ON r.draft_id = d.draft_id AND r.revision = d.latest_revision "
                "WHERE d.draft_id = $1")
LOCK_DRAFT = f"SELECT {columns(drafts)} FROM {drafts.fullname} WHERE draft_id = $1 FOR UPDATE"
REVISION_SNAPSHOT = f"SELECT snapshot FROM {draft_revisions.fullname} WHERE draft_id = $1 AND revision = $2"
NEW_DRAFT = (f"INSERT INTO {drafts.fullname} (draft_id, session_id, owner, latest_revision, status) "
             "VALUES ($1, $2, $3, 1, 'open')")
# A draft's next revision becomes its latest; the row it matched (none: it moved while locked).
MOVE_DRAFT = (f"UPDATE {drafts.fullname} SET latest_revision = $2 WHERE draft_id = $1 AND latest_revision = $2 - 1 "
              "RETURNING draft_id")
REVISION_COLUMNS = ("draft_id", "revision", "snapshot", "operation_id", "created_at")
INSERT_REVISION = (f"INSERT INTO {draft_revisions.fullname} ({column_names(REVISION_COLUMNS)}) "
                   "VALUES ($1, $2, $3, $4, $5)")

ORDER_COLUMNS = tuple(c.name for c in orders.c)
INSERT_ORDER = (f"INSERT INTO {orders.fullname} ({column_names(ORDER_COLUMNS)}) "
                f"VALUES ({', '.join(f'${i}' for i in range(1, len(ORDER_COLUMNS) + 1))})")

OPERATIONS = operations.fullname
OPERATION = f"SELECT {columns(operations)} FROM {OPERATIONS} WHERE operation_id = $1"
LOCK_OPERATION = OPERATION + " FOR UPDATE"
# The first version of a call's operation (an edit's versions supersede it).
OPERATION_FOR_CALL = (f"SELECT {columns(operations)} FROM {OPERATIONS} "
                      "WHERE session_id = $1 AND call_id = $2 AND supersedes IS NULL")


@functools.cache
def insert_operation(names: tuple[str, ...]) -> str:
    """A prepared operation with these columns (``$1``… in this order); its row."""
    values = ", ".join(f"${i}" for i in range(1, len(names) + 1))
    return (f"INSERT INTO {OPERATIONS} ({column_names(names)}, status) VALUES ({values}, 'prepared') "
            f"RETURNING {columns(operations)}")


# The outcome of a commit (``$1`` the operation, then status, result, error, grant_pending_id, decided_by, and
# whether it committed: committed_at is the commit's time only then); its row, none if it was finished already.
FINISH_OPERATION = (f"UPDATE {OPERATIONS} SET status = $2, result = $3, error = $4, grant_pending_id = $5, "
                    "decided_by = $6, committed_at = CASE WHEN $7::boolean THEN now() END "
                    f"WHERE operation_id = $1 AND status = 'prepared' RETURNING {columns(operations)}")
CONSUME_GRANT = (f"INSERT INTO {consumed_grants.fullname} (pending_id, operation_id) VALUES ($1, $2) "
                 "ON CONFLICT DO NOTHING RETURNING pending_id")
