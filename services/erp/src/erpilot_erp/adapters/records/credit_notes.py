"""The credit note (``issue_credit_note``'s record kind): its table, its ids (CN-9101, ...), its rows and its SQL.

Read per order (``Rows.ORDER_CREDIT_NOTES``: by ``issue_credit_note`` and ``refund_payment`` on prepare and commit,
and by ``get_order``) and inserted by the tool's one effect, ``NewCreditNote``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Sequence,
    String,
    Table,
    Text,
    bindparam,
    func,
    select,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_erp.adapters.records import applies, id_kind, row_set
from erpilot_erp.adapters.tables import SCHEMA, metadata
from erpilot_erp.domain.issue_credit_note import NewCreditNote
from erpilot_erp.domain.model import CreditNote
from erpilot_erp.domain.plans import Rows

credit_note_numbers = Sequence("credit_note_numbers", start=9101, metadata=metadata)
id_kind("credit_note", credit_note_numbers, "CN")

credit_notes = Table(
    "credit_notes", metadata,
    Column("credit_note_id", String(64), primary_key=True),
    Column("order_id", String(64), ForeignKey(f"{SCHEMA}.orders.order_id"), nullable=False, index=True),
    Column("amount_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("reason", Text, nullable=False),
    Column("remaining_minor", BigInteger, nullable=False),
    Column("operation_id", String(100), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("amount_minor > 0 AND remaining_minor >= 0", name="credit_within_order"),
)


def credit_note(row: Any) -> CreditNote:
    return CreditNote(row.credit_note_id, row.order_id, row.amount_minor, row.currency, row.reason,
                      row.remaining_minor, row.created_at)


def credit_note_values(value: CreditNote, *, operation_id: str) -> dict[str, Any]:
    return {
        "credit_note_id": value.credit_note_id, "order_id": value.order_id, "amount_minor": value.amount_minor,
        "currency": value.currency, "reason": value.reason, "remaining_minor": value.remaining_minor,
        "operation_id": operation_id, "created_at": value.created_at,
    }


# Built once with a bind parameter, like the repository's hot statements: it runs on every refund and credit note.
_OF_ORDER = select(credit_notes).where(credit_notes.c.order_id == bindparam("order_id")).order_by(
    credit_notes.c.created_at, credit_notes.c.credit_note_id)


@row_set(Rows.ORDER_CREDIT_NOTES)
async def of_order(conn: AsyncConnection, order_id: str) -> list[CreditNote]:
    """The credit notes issued against the order, oldest first (not locked: see ``Rows.ORDER_CREDIT_NOTES``)."""
    return [credit_note(row) for row in (await conn.execute(_OF_ORDER, {"order_id": order_id})).all()]


@applies(NewCreditNote)
async def insert(conn: AsyncConnection, effect: NewCreditNote, operation_id: str) -> None:
    await conn.execute(credit_notes.insert().values(credit_note_values(effect.note, operation_id=operation_id)))
