"""NATS endpoints of the ERP: each handler is ``async def handle(msg, deps: ErpDeps) -> reply``, translating a
contract into a use-case call; it returns its typed reply or raises ``Refused`` / ``InvalidMessage`` (answered
and, for the latter, dead-lettered by the ServiceBus). The first paragraph of a handler's docstring describes
its endpoint (AsyncAPI).

Commands (durable, JetStream, idempotent by a business key): ``cmd.erp.prepare`` (operation_id; its outbox sends
``cmd.approval.request``), ``cmd.erp.commit`` (operation_id, under the grant; sent by the approval service's
outbox), ``cmd.erp.update_product`` (request_id). A retried command (core NATS, stored before its answer, sent again
by the agent with the same key, issue 31): ``req.erp.draft`` (operation_id). Queries (core NATS, no effects):
``query.erp.read``, ``query.erp.operation``, ``query.erp.view``.
"""

from __future__ import annotations

from dataclasses import dataclass

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
from erpilot_platform.batches import batched
from erpilot_platform.endpoints import ServiceBus


@dataclass(frozen=True)
class ErpDeps:
    """What the ERP's handlers work with: the ledger (its unit of work) and its use cases."""

    unit: Ledger
    reads: ReadTools
    drafts: DraftService
    operations: OperationService
    products: ProductService


async def read_tool(cmd: ExecuteToolV1, deps: ErpDeps) -> ToolResultV1:
    """Run a read tool against the ledger."""
    return await deps.reads.run(cmd)


async def draft_tool(cmd: ExecuteToolV1, deps: ErpDeps) -> ToolResultV1:
    """Run a draft tool (one new revision)."""
    return await deps.drafts.handle(cmd)


@batched  # its effects are one unit of work, with no network wait before it (erpilot_platform.batches)
async def prepare(cmd: PrepareOperationV1, deps: ErpDeps) -> PreparedOperationV1:
    """Store a write, ask for its approval (outbox) and preview it."""
    return await deps.operations.prepare(cmd)


@batched  # likewise: the grant verified in memory, then one unit of work
async def commit(cmd: CommitOperationV1, deps: ErpDeps) -> OperationStatusV1:
    """Commit a prepared write under a grant."""
    return await deps.operations.commit(cmd)


async def update_product(cmd: UpdateProductV1, deps: ErpDeps) -> ProductV1:
    """Change a product's price/status."""
    return await deps.products.update(cmd)


async def operation(query: GetOperationV1, deps: ErpDeps) -> OperationStatusV1:
    """Status of one operation."""
    return await backoffice.get_operation(deps.unit, query)


async def view(query: ErpViewV1, deps: ErpDeps) -> ErpViewResultV1:
    """Back-office read views."""
    return await backoffice.view(deps.unit, query)


HANDLERS = {
    requests.ERP_READ: read_tool,
    requests.ERP_DRAFT: draft_tool,
    requests.ERP_PREPARE: prepare,
    requests.ERP_COMMIT: commit,
    requests.ERP_UPDATE_PRODUCT: update_product,
    requests.ERP_OPERATION: operation,
    requests.ERP_VIEW: view,
}


def register(bus: ServiceBus, deps: ErpDeps) -> None:
    bus.register(HANDLERS, deps)
