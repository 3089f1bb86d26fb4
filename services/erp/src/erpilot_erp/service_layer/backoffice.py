"""Back-office views behind ``/v1/erp/...``, the operation status, and the product change (price/status)."""

from __future__ import annotations

from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ErpViewV1, GetOperationV1, GetPreparedOperationV1, UpdateProductV1
from erpilot_erp.service_layer.operations import operation_status, prepared_record
from erpilot_erp.service_layer.ports import Ledger, LedgerReads, LedgerUnitOfWork
from erpilot_erp.service_layer.replies import once, request_print


def _not_found(kind: str, key: object) -> ReplyV1:
    return ReplyV1.failure("not_found", f"{kind} {key} not found", 404)


async def get_operation(reads: LedgerReads, query: GetOperationV1) -> ReplyV1:
    record = await reads.operation(query.operation_id)
    return ReplyV1.success(operation_status(record)) if record else _not_found("operation", query.operation_id)


async def get_prepared(reads: LedgerReads, query: GetPreparedOperationV1) -> ReplyV1:
    """The ledger's record of a prepared operation (its preview, arguments, fingerprint), for the approval."""
    record = await reads.operation(query.operation_id)
    return ReplyV1.success(prepared_record(record)) if record else _not_found("operation", query.operation_id)


async def view(reads: LedgerReads, query: ErpViewV1) -> ReplyV1:
    """One ERP view in its SPEC §2 shape; a draft is shown whatever session it belongs to."""
    if query.view in ("product", "order", "draft") and not query.id:
        return ReplyV1.failure("invalid_message", f"the {query.view} view needs an id", 422)
    match query.view:
        case "products":
            return ReplyV1.success(await reads.search_products(query.query))
        case "customers":
            return ReplyV1.success(await reads.search_customers(query.query))
        case "product":
            found = await reads.product(query.id)
        case "order":
            found = await reads.order(query.id)
        case _:
            found = await reads.draft_revision(query.id, query.revision, None)
    if found is None:
        what = f"{query.id} revision {query.revision}" if query.revision else query.id
        return _not_found(query.view, what)
    return ReplyV1.success(found)


class ProductService:
    """``cmd.erp.update_product``: a back-office change that makes waiting quotes of the product stale."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    async def update(self, cmd: UpdateProductV1) -> ReplyV1:
        if cmd.price_minor is None and cmd.status is None:
            return ReplyV1.failure("invalid_message", "give price_minor, status or both", 422)
        if cmd.price_minor is not None and cmd.price_minor < 0:
            return ReplyV1.failure("invalid_message", "price_minor must not be negative", 422)

        async def work(uow: LedgerUnitOfWork) -> ReplyV1:
            asked = request_print(sku=cmd.sku, price_minor=cmd.price_minor, status=cmd.status)
            return await once(uow, f"product:{cmd.request_id}", asked, lambda: self._apply(uow, cmd))

        return await self.ledger.run(work)

    @staticmethod
    async def _apply(uow: LedgerUnitOfWork, cmd: UpdateProductV1) -> ReplyV1:
        changes = {k: v for k, v in (("price_minor", cmd.price_minor), ("status", cmd.status)) if v is not None}
        product = await uow.repo.update_product(cmd.sku, changes)
        if product is None:
            return _not_found("product", cmd.sku)
        return ReplyV1.success(product.to_result())

