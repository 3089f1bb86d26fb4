"""adjust_stock: move a product's on-hand by a signed delta, never below zero."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from erpilot_erp.domain.errors import BusinessError, ErrorCode, not_found
from erpilot_erp.domain.model import Product
from erpilot_erp.domain.plans import (
    PIECES,
    CommitPlan,
    Prepared,
    Rows,
    StockChange,
    WriteState,
    WriteTool,
    effect,
    preview,
)


@dataclass(frozen=True)
class AdjustStock:
    """Move ``sku``'s on-hand by ``delta`` (non-zero), for ``reason``."""

    tool: ClassVar[str] = "adjust_stock"
    sku: str
    delta: int
    reason: str


def prepare_adjust_stock(args: AdjustStock, state: WriteState, now: datetime) -> Prepared:
    """Check the result stays at or above zero and preview on-hand before -> after."""
    product = _product(args.sku, state.products)
    after = _checked_after(product, args.delta)
    facts = {"sku": product.sku, "on_hand_before": product.on_hand, "on_hand_after": after}
    direction = "add" if args.delta > 0 else "remove"
    return Prepared(
        facts=facts,
        preview=preview(
            operation="Adjust stock",
            object=f"Product {product.sku}",
            target=product.name,
            effects=[effect(f"on hand {product.sku}", product.on_hand, after, PIECES)],
            notes=[f"{direction.capitalize()} {abs(args.delta)} unit(s).", f"Reason: {args.reason}"],
            details={"sku": product.sku, "name": product.name, "status": product.status, "delta": args.delta,
                     "reason": args.reason},
        ),
    )


def commit_adjust_stock(
    args: AdjustStock, facts: Mapping[str, Any], state: WriteState, now: datetime
) -> CommitPlan:
    """Re-check on-hand is still what the preview showed, then apply the delta."""
    product = _product(args.sku, state.products)
    if product.on_hand != facts["on_hand_before"]:
        raise BusinessError(
            ErrorCode.STOCK_CHANGED,
            f"on-hand of {product.sku} was {facts['on_hand_before']} in the preview and is "
            f"{product.on_hand} now; nothing was adjusted",
            sku=product.sku, stock_before=facts["on_hand_before"], on_hand=product.on_hand,
        )
    after = _checked_after(product, args.delta)
    return CommitPlan(
        result=product.with_on_hand(after).to_result(),
        effects=(StockChange(sku=product.sku, before=product.on_hand, after=after),),
    )


TOOL = WriteTool(
    name=AdjustStock.tool, args=AdjustStock, rows=(Rows.PRODUCT,),
    prepare=lambda args, state, now, stock_check: prepare_adjust_stock(args, state, now),
    commit=lambda args, facts, state, now, stock_check, new_id: commit_adjust_stock(args, facts, state, now),
)


def _product(sku: str, products: Mapping[str, Product]) -> Product:
    product = products.get(sku)
    if product is None:
        raise not_found("product", sku)
    return product


def _checked_after(product: Product, delta: int) -> int:
    after = product.on_hand + delta
    if after < 0:
        raise BusinessError(
            ErrorCode.INSUFFICIENT_STOCK,
            f"{product.sku} has {product.on_hand} on hand; removing {-delta} would leave {after}",
            sku=product.sku,
        )
    return after
