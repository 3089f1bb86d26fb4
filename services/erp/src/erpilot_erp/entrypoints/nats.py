"""NATS endpoints of the ERP: translate contracts into use-case calls; each returns its typed reply or raises
``Refused`` / ``InvalidMessage`` (answered and, for the latter, dead-lettered by the ServiceBus).

Commands (durable, JetStream, idempotent by a business key): ``cmd.erp.draft`` (operation_id),
``cmd.erp.prepare`` (operation_id; its outbox sends ``cmd.approval.request``), ``cmd.erp.commit`` (operation_id,
under the grant; sent by the approval service's outbox), ``cmd.erp.update_product`` (request_id). Queries (core
NATS, no effects): ``query.erp.read``, ``query.erp.operation``, ``query.erp.view``.
"""

from __future__ import annotations

from erpilot_contracts import requests
from erpilot_contracts.erp.v1 import (
    CommitOperationV1,
    ErpViewResultV1,
    ErpViewV1,
    ExecuteToolV1,
    GetOperationV1,
    OperationStatusV1,
    PreparedOperationV1,
    PrepareOperationV1,
    ProductV1,
    ToolResultV1,
    UpdateProductV1,
)
from erpilot_erp.service_layer import backoffice
from erpilot_erp.service_layer.backoffice import ProductService
from erpilot_erp.service_layer.drafts import DraftService
from erpilot_erp.service_layer.operations import OperationService
from erpilot_erp.service_layer.ports import Ledger
from erpilot_erp.service_layer.reads import ReadTools
from erpilot_platform.endpoints import ServiceBus


def register(bus: ServiceBus, ledger: Ledger, *, reads: ReadTools, drafts: DraftService,
             operations: OperationService, products: ProductService) -> None:
    @bus.serve(requests.ERP_READ, description="Run a read tool against the ledger.")
    async def read_tool(cmd: ExecuteToolV1) -> ToolResultV1:
        return await reads.run(cmd)

    @bus.serve(requests.ERP_DRAFT, description="Run a draft tool (one new revision).")
    async def draft_tool(cmd: ExecuteToolV1) -> ToolResultV1:
        return await drafts.handle(cmd)

    @bus.serve(requests.ERP_PREPARE, description="Store a write, ask for its approval (outbox) and preview it.")
    async def prepare(cmd: PrepareOperationV1) -> PreparedOperationV1:
        return await operations.prepare(cmd)

    @bus.serve(requests.ERP_COMMIT, description="Commit a prepared write under a grant.")
    async def commit(cmd: CommitOperationV1) -> OperationStatusV1:
        return await operations.commit(cmd)

    @bus.serve(requests.ERP_UPDATE_PRODUCT, description="Change a product's price/status.")
    async def update_product(cmd: UpdateProductV1) -> ProductV1:
        return await products.update(cmd)

    @bus.serve(requests.ERP_OPERATION, description="Status of one operation.")
    async def operation(query: GetOperationV1) -> OperationStatusV1:
        return await backoffice.get_operation(ledger, query)

    @bus.serve(requests.ERP_VIEW, description="Back-office read views.")
    async def view(query: ErpViewV1) -> ErpViewResultV1:
        return await backoffice.view(ledger, query)
