"""Business rejections of the ERP domain: a stable code for machines plus a sentence for people.

A ``BusinessError`` is an expected outcome, not a bug: the adapter answers a read or draft tool with
``outcome: "business_rejected"`` and records a rejected commit under its ``operation_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """The business codes several parts of the ERP domain raise (SPEC §2 and §3); ``meaning`` says when. A code
    one write tool alone raises is a ``ToolErrorCode`` in that tool's module (``WriteTool.error_codes``); every
    code: ``domain.operations.business_codes``."""

    meaning: str

    def __new__(cls, code: str, meaning: str) -> ErrorCode:
        member = str.__new__(cls, code)
        member._value_ = code
        member.meaning = meaning
        return member

    # Each member: the wire code, then when it is raised.
    NOT_FOUND = (
        "not_found",
        "The object does not exist, or is a draft of another session, or a draft or an order that is not the "
        "requester's (domain.owners; never say which).",
    )
    DRAFT_CHANGED = (
        "draft_changed",
        "The draft moved on: an edit's base_revision or a submitted revision is not the latest; at commit, "
        "the draft got a newer revision or was submitted since the preview.",
    )
    SKU_MISMATCH = "sku_mismatch", "The line at item_number holds another SKU than expected_sku."
    LINE_NOT_FOUND = "line_not_found", "The draft revision has no line with that item_number."
    PRODUCT_UNAVAILABLE = "product_unavailable", "A draft revision would contain a discontinued product."
    CURRENCY_MISMATCH = (
        "currency_mismatch",
        "Currencies would be mixed: a draft line priced in another currency, or a refund or credit note in a "
        "currency other than the order's.",
    )
    DRAFT_CLOSED = "draft_closed", "The draft was already submitted; it can no longer be edited or submitted."
    DRAFT_EMPTY = "draft_empty", "The draft revision to submit has no lines: there is nothing to order."
    QUOTE_CHANGED = (
        "quote_changed",
        "The catalog no longer matches the quote: a price, the customer discount, a product name or status.",
    )
    STOCK_CHANGED = (
        "stock_changed",
        "On-hand moved since the person saw it (stock_check exact, and adjust_stock), or no longer covers "
        "the order (stock_check sufficient).",
    )
    QUOTE_EXPIRED = "quote_expired", "The draft revision's valid_until has passed."
    ORDER_CHANGED = (
        "order_changed",
        "The order is not as the preview showed it: no longer placed (cancel, credit note), or refunded meanwhile.",
    )
    INSUFFICIENT_STOCK = "insufficient_stock", "The effect would leave on-hand stock below zero."


@dataclass(frozen=True)
class ToolErrorCode:
    """A business code one write tool alone raises, declared in its own module and listed with it
    (``WriteTool.error_codes``), so a new tool adds its codes without touching this module."""

    value: str
    meaning: str


class BusinessError(Exception):
    """A rule of the business refused the request; ``code`` is an ``ErrorCode`` or a tool's ``ToolErrorCode``."""

    def __init__(self, code: ErrorCode | ToolErrorCode, message: str, **details: Any):
        super().__init__(f"{code.value}: {message}")
        self.code: str = code.value
        self.message = message
        self.details: dict[str, Any] = details

    def to_error(self) -> dict[str, Any]:
        """The ``{code, message}`` body of a business rejection (plus ``details`` when there are some)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return error


def not_found(kind: str, key: object) -> BusinessError:
    """The uniform ``not_found`` error, e.g. ``not_found("draft", "D-1001")``."""
    return BusinessError(ErrorCode.NOT_FOUND, f"{kind} {key} not found", kind=kind, id=str(key))
