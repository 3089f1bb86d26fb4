"""The ERP's records as immutable values, each with ``to_result()`` giving its SPEC §2 result shape.

The adapter loads these by key and stores what the domain returns; nothing here touches I/O.
Times are timezone-aware ``datetime``s and appear in results as ISO-8601 strings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any, Literal

ProductStatus = Literal["active", "discontinued"]
DraftStatus = Literal["open", "submitted"]
OrderStatus = Literal["placed", "cancelled"]


class FlatRecord:
    """A record whose result is every one of its fields as it is (``dataclasses.asdict``)."""

    def to_result(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass


@dataclass(frozen=True)
class Product(FlatRecord):
    """A catalog item with its current list price and on-hand stock."""

    sku: str
    name: str
    status: ProductStatus
    price_minor: int
    currency: str
    on_hand: int

    @property
    def is_active(self) -> bool:
        return self.status == "active"

    def with_on_hand(self, on_hand: int) -> Product:
        """The same product with another stock level."""
        return replace(self, on_hand=on_hand)


@dataclass(frozen=True)
class Customer(FlatRecord):
    """A customer; ``discount_pct`` is its tier, applied to every line it orders."""

    customer_id: str
    name: str
    discount_pct: int


@dataclass(frozen=True)
class DraftLine(FlatRecord):
    """One priced line of a draft revision, with the stock seen when the revision was made."""

    item_number: int
    sku: str
    name: str
    qty: int
    unit_price_minor: int
    discount_pct: int
    line_total_minor: int
    stock_before: int


@dataclass(frozen=True)
class DraftRevision:
    """An immutable quote snapshot; every edit makes a new revision and leaves this one as it was.

    ``status`` is the draft's status when loaded: the adapter keeps it per draft, so every revision of a
    submitted draft reads ``"submitted"``.
    """

    draft_id: str
    revision: int
    session_id: str
    customer_id: str
    customer_name: str
    lines: tuple[DraftLine, ...]
    total_amount_minor: int
    currency: str
    note: str | None
    valid_until: datetime
    created_at: datetime
    status: DraftStatus = "open"
    # The person who created the draft (the vouched ``sub``; ``domain.owners``): None for drafts made before owners
    # were recorded, which are nobody's. Not part of the result: the model never sees who owns what.
    owner: str | None = None

    @property
    def is_open(self) -> bool:
        return self.status == "open"

    def line(self, item_number: int) -> DraftLine | None:
        """The line with that 1-based number, or None."""
        if 1 <= item_number <= len(self.lines):
            return self.lines[item_number - 1]
        return None

    def to_result(self) -> dict[str, Any]:
        """The revision as SPEC §2 describes it (the session id stays internal)."""
        return {
            "draft_id": self.draft_id,
            "revision": self.revision,
            "status": self.status,
            "customer_id": self.customer_id,
            "customer_name": self.customer_name,
            "lines": [line.to_result() for line in self.lines],
            "total_amount_minor": self.total_amount_minor,
            "currency": self.currency,
            "note": self.note,
            "valid_until": self.valid_until.isoformat(),
            "created_at": self.created_at.isoformat(),
        }

    def to_candidate(self) -> dict[str, Any]:
        """``{draft_id, revision, customer_id, total_amount_minor}`` for an ambiguous ``get_order_task``."""
        return {
            "draft_id": self.draft_id,
            "revision": self.revision,
            "customer_id": self.customer_id,
            "total_amount_minor": self.total_amount_minor,
        }


@dataclass(frozen=True)
class OrderLine(FlatRecord):
    """An ordered line at the price that was approved."""

    sku: str
    name: str
    qty: int
    unit_price_minor: int
    line_total_minor: int


@dataclass(frozen=True)
class Order:
    """A placed (or cancelled) order; the demo payment is captured at commit, so ``paid_minor`` = total."""

    order_id: str
    customer_id: str
    customer_name: str
    status: OrderStatus
    lines: tuple[OrderLine, ...]
    total_amount_minor: int
    currency: str
    paid_minor: int
    refunded_minor: int
    created_at: datetime
    draft_id: str | None = None
    revision: int | None = None
    # The session whose draft made it (who may see it: the gateway, SPEC §10); None for orders no session made
    # (the back office's history). Not part of the result: a session id is never shown to the model.
    session_id: str | None = None
    # The owner of the draft that made it (``domain.owners``); None for the back office's history and for orders
    # made before owners were recorded. Not part of the result either.
    owner: str | None = None

    @property
    def remaining_minor(self) -> int:
        """What of the payment was not refunded (a credit note may hold part of it: ``refundable_minor``)."""
        return self.paid_minor - self.refunded_minor

    def refundable_minor(self, credit_notes: tuple[CreditNote, ...]) -> int:
        """What can still be refunded: the payment not refunded yet, and no more than the total less refunds and
        the credit notes issued against the order. Refunds and credit notes both give the customer money back
        against the order; together they never exceed what it was worth (a full credit note and then a full
        refund would pay the customer twice)."""
        return min(self.remaining_minor, self.creditable_minor(credit_notes))

    def creditable_minor(self, credit_notes: tuple[CreditNote, ...]) -> int:
        """The total less refunds and the credit notes issued against the order."""
        credited = sum(note.amount_minor for note in credit_notes if note.order_id == self.order_id)
        return self.total_amount_minor - self.refunded_minor - credited

    def to_result(self) -> dict[str, Any]:
        """The order as SPEC §2 describes it, plus customer, source draft and creation time."""
        return {
            "order_id": self.order_id,
            "status": self.status,
            "customer_id": self.customer_id,
            "customer_name": self.customer_name,
            "lines": [line.to_result() for line in self.lines],
            "total_amount_minor": self.total_amount_minor,
            "currency": self.currency,
            "paid_minor": self.paid_minor,
            "refunded_minor": self.refunded_minor,
            "draft_id": self.draft_id,
            "revision": self.revision,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class Refund:
    """Money returned on an order; ``remaining_minor`` is what stayed refundable right after it."""

    refund_id: str
    order_id: str
    amount_minor: int
    currency: str
    channel: str
    remaining_minor: int
    created_at: datetime

    def to_result(self) -> dict[str, Any]:
        """``{refund_id, order_id, amount_minor, currency, remaining_minor}``."""
        return {
            "refund_id": self.refund_id,
            "order_id": self.order_id,
            "amount_minor": self.amount_minor,
            "currency": self.currency,
            "remaining_minor": self.remaining_minor,
        }


@dataclass(frozen=True)
class CreditNote:
    """An amount credited to the customer against an order (no money moves now, no stock moves);
    ``remaining_minor`` is what stayed creditable right after it (total - refunded - credited)."""

    credit_note_id: str
    order_id: str
    amount_minor: int
    currency: str
    reason: str
    remaining_minor: int
    created_at: datetime

    def to_result(self) -> dict[str, Any]:
        """``{credit_note_id, order_id, amount_minor, currency, reason, remaining_minor}``."""
        return {
            "credit_note_id": self.credit_note_id,
            "order_id": self.order_id,
            "amount_minor": self.amount_minor,
            "currency": self.currency,
            "reason": self.reason,
            "remaining_minor": self.remaining_minor,
        }
