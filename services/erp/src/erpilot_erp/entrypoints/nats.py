"""NATS endpoints of the ERP: translate contracts into use-case calls.

Commands (durable, JetStream, idempotent by a business key): ``cmd.erp.draft`` (operation_id),
``cmd.erp.prepare`` (operation_id), ``cmd.erp.commit`` (operation_id, under the grant),
``cmd.erp.update_product`` (request_id). Queries (core NATS, no effects): ``query.erp.read``,
``query.erp.operation``, ``query.erp.prepared`` (the approval service's source of truth for a preview),
``query.erp.view``. A message that does not validate is answered
``invalid_message`` by the ServiceBus and dead-lettered.
"""

from __future__ import annotations

from erpilot_contracts import requests
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import (
    CommitOperationV1,
    ErpViewV1,
    ExecuteToolV1,
    GetOperationV1,
    GetPreparedOperationV1,
    PrepareOperationV1,
    UpdateProductV1,
)
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_erp.service_layer import backoffice
from erpilot_erp.service_layer.backoffice import ProductService
from erpilot_erp.service_layer.drafts import DraftService
from erpilot_erp.service_layer.operations import OperationService
from erpilot_erp.service_layer.ports import LedgerReads
from erpilot_erp.service_layer.reads import run_read_tool
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.tool_arguments import normalised_or_refusal


def register(bus: ServiceBus, reads: LedgerReads, *, drafts: DraftService, operations: OperationService,
             products: ProductService) -> None:
    @bus.serve(requests.ERP_READ, description="Run a read tool against the ledger.")
    async def read_tool(cmd: ExecuteToolV1) -> ReplyV1:
        args = normalised_or_refusal(cmd.tool, cmd.arguments)
        if isinstance(args, ReplyV1):
            return args
        if get_tool(cmd.tool).kind is not ToolKind.READ:
            return ReplyV1.failure("not_a_read_tool", f"{cmd.tool} is not a read tool", 422)
        return ReplyV1.success(await run_read_tool(reads, cmd.model_copy(update={"arguments": args})))

    @bus.serve(requests.ERP_DRAFT, description="Run a draft tool (one new revision).")
    async def draft_tool(cmd: ExecuteToolV1) -> ReplyV1:
        return await drafts.handle(cmd)

    @bus.serve(requests.ERP_PREPARE, description="Store a write and preview it.")
    async def prepare(cmd: PrepareOperationV1) -> ReplyV1:
        return await operations.prepare(cmd)

    @bus.serve(requests.ERP_COMMIT, description="Commit a prepared write under a grant.")
    async def commit(cmd: CommitOperationV1) -> ReplyV1:
        return await operations.commit(cmd)

    @bus.serve(requests.ERP_UPDATE_PRODUCT, description="Change a product's price/status.")
    async def update_product(cmd: UpdateProductV1) -> ReplyV1:
        return await products.update(cmd)

    @bus.serve(requests.ERP_OPERATION, description="Status of one operation.")
    async def operation(query: GetOperationV1) -> ReplyV1:
        return await backoffice.get_operation(reads, query)

    @bus.serve(requests.ERP_PREPARED,
               description="The ledger's own record of a prepared operation (preview, arguments, fingerprint).")
    async def prepared(query: GetPreparedOperationV1) -> ReplyV1:
        return await backoffice.get_prepared(reads, query)

    @bus.serve(requests.ERP_VIEW, description="Back-office read views.")
    async def view(query: ErpViewV1) -> ReplyV1:
        return await backoffice.view(reads, query)
