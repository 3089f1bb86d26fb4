"""Back-office views behind ``/v1/erp/...``, the operation status, and the product change (price/status).

Each view and the status is one read of committed state (``Ledger.read``: one statement, no transaction).
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts.erp.v1 import (
    ErpViewResultV1,
    ErpViewV1,
    GetOperationV1,
    OperationStatusV1,
    ProductV1,
    UpdateProductV1,
)
from erpilot_contracts.json_input import CANONICAL_INT_MAX
from erpilot_erp.domain.plans import Rows
from erpilot_erp.service_layer import messages
from erpilot_erp.service_layer.ports import Ledger, Work
from erpilot_erp.service_layer.replies import answered, once
from erpilot_platform.refusals import Refused


def not_found(kind: str, key: object) -> Refused:
    return Refused("not_found", f"{kind} {key} not found", 404)


async def get_operation(ledger: Ledger, query: GetOperationV1) -> OperationStatusV1:
    record = await ledger.read(lambda unit: unit.ledger.operation(query.operation_id))
    if record is None:
        raise not_found("operation", query.operation_id)
    return messages.operation_status(record)


async def view(ledger: Ledger, query: ErpViewV1) -> ErpViewResultV1:
    """One ERP view in its SPEC §2 shape, plus the session a draft or an order came from: who may see it is the
    gateway's decision (the session's owner, an approver of an approval naming it, an admin; SPEC §10)."""
    if query.view in ("product", "order", "draft") and not query.id:
        raise Refused("invalid_message", f"the {query.view} view needs an id", 422)

    async def look(unit: Work) -> Any:
        match query.view:
            case "products":
                return messages.products(await unit.ledger.search_products(query.query))
            case "customers":
                return messages.customers(await unit.ledger.search_customers(query.query))
            case "product":
                found = (await unit.ledger.products_by_sku([query.id])).get(query.id)
                return messages.product(found) if found else None
            case "order":
                found = await unit.ledger.order(query.id)
                if found is None:
                    return None
                return messages.order(found, await unit.ledger.row_set(Rows.ORDER_CREDIT_NOTES, query.id))
            case _:
                found = await unit.ledger.draft_revision(query.id, query.revision)
                return messages.draft_revision(found) if found else None

    found = await ledger.read(look)
    if found is None:
        raise not_found(query.view, f"{query.id} revision {query.revision}" if query.revision else query.id)
    return ErpViewResultV1(found)


def _asked(cmd: UpdateProductV1) -> dict[str, Any]:
    """What a product change asks for. The schema allows prices beyond RFC 8785's integers (2**53 - 1):
    such a price goes into the digest as its decimal string, still one digest per change."""
    price = cmd.price_minor
    return {"sku": cmd.sku, "price_minor": str(price) if price is not None and price > CANONICAL_INT_MAX else price,
            "status": cmd.status}


class ProductService:
    """``cmd.erp.update_product``: a back-office change that makes waiting quotes of the product stale."""

    def __init__(self, ledger: Ledger):
        self.unit = ledger

    async def update(self, cmd: UpdateProductV1) -> ProductV1:
        if cmd.price_minor is None and cmd.status is None:
            raise Refused("invalid_message", "give price_minor, status or both", 422)
        if cmd.price_minor is not None and cmd.price_minor < 0:
            raise Refused("invalid_message", "price_minor must not be negative", 422)

        async def work(unit: Work) -> ProductV1 | Refused:
            return await once(unit, f"product:{cmd.request_id}", _asked(cmd), ProductV1, lambda: self._apply(unit, cmd))

        return answered(await self.unit.run(work))

    @staticmethod
    async def _apply(unit: Work, cmd: UpdateProductV1) -> ProductV1:
        changes = {k: v for k, v in (("price_minor", cmd.price_minor), ("status", cmd.status)) if v is not None}
        product = await unit.ledger.update_product(cmd.sku, changes)
        if product is None:
            raise not_found("product", cmd.sku)
        return messages.product(product)
