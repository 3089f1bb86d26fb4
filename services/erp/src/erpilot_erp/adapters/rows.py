"""Rows of the ``erp`` tables to domain values and back (no queries here)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from erpilot_erp.domain.model import (
    Customer,
    DraftLine,
    DraftRevision,
    Order,
    OrderLine,
    Product,
    Refund,
)


def product(row: Any) -> Product:
    return Product(row.sku, row.name, row.status, row.price_minor, row.currency, row.on_hand)


def customer(row: Any) -> Customer:
    return Customer(row.customer_id, row.name, row.discount_pct)


def order(row: Any) -> Order:
    return Order(
        order_id=row.order_id, customer_id=row.customer_id, customer_name=row.customer_name, status=row.status,
        lines=tuple(OrderLine(**{k: line[k] for k in ("sku", "name", "qty", "unit_price_minor", "line_total_minor")})
                    for line in row.lines),
        total_amount_minor=row.total_amount_minor, currency=row.currency, paid_minor=row.paid_minor,
        refunded_minor=row.refunded_minor, created_at=row.created_at, draft_id=row.draft_id, revision=row.revision,
        session_id=row.session_id, owner=row.owner,
    )


def order_values(value: Order) -> dict[str, Any]:
    """Column values of a new order row."""
    return {
        "order_id": value.order_id, "customer_id": value.customer_id, "customer_name": value.customer_name,
        "status": value.status, "lines": [line.to_result() for line in value.lines],
        "total_amount_minor": value.total_amount_minor, "currency": value.currency, "paid_minor": value.paid_minor,
        "refunded_minor": value.refunded_minor, "draft_id": value.draft_id, "revision": value.revision,
        "session_id": value.session_id, "owner": value.owner, "created_at": value.created_at,
    }


def refund_values(value: Refund, *, operation_id: str) -> dict[str, Any]:
    return {
        "refund_id": value.refund_id, "order_id": value.order_id, "amount_minor": value.amount_minor,
        "currency": value.currency, "channel": value.channel, "remaining_minor": value.remaining_minor,
        "operation_id": operation_id, "created_at": value.created_at,
    }


def revision_snapshot(revision: DraftRevision) -> dict[str, Any]:
    """What ``draft_revisions.snapshot`` holds: the revision's result without the per-draft status."""
    snapshot = revision.to_result()
    snapshot.pop("status")
    return snapshot


def revision(snapshot: dict[str, Any], *, session_id: str, status: str, owner: str | None) -> DraftRevision:
    """A stored snapshot back as a ``DraftRevision`` (``session_id``, ``status`` and ``owner`` live on the draft
    row)."""
    return DraftRevision(
        draft_id=snapshot["draft_id"], revision=snapshot["revision"], session_id=session_id,
        customer_id=snapshot["customer_id"], customer_name=snapshot["customer_name"],
        lines=tuple(DraftLine(**line) for line in snapshot["lines"]),
        total_amount_minor=snapshot["total_amount_minor"], currency=snapshot["currency"], note=snapshot["note"],
        valid_until=datetime.fromisoformat(snapshot["valid_until"]),
        created_at=datetime.fromisoformat(snapshot["created_at"]), status=status,  # type: ignore[arg-type]
        owner=owner,
    )
