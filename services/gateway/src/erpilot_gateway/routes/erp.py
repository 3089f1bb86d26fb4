"""ERP read views, operation status for reconciliation, and the back-office product change."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request

from erpilot_contracts import requests
from erpilot_contracts.erp.v1 import (
    CustomerListV1,
    DraftRevisionV1,
    ErpViewV1,
    GetOperationV1,
    OrderV1,
    ProductListV1,
    ProductV1,
    UpdateProductV1,
)
from erpilot_gateway import erp_readers
from erpilot_gateway.answers import OperationView
from erpilot_gateway.auth import CurrentUser, require_roles
from erpilot_gateway.bodies import ProductPatchBody
from erpilot_gateway.problems import Problem

router = APIRouter(tags=["erp"])
Requester = require_roles("requester")
# Drafts and orders: whoever erp_readers lets read that one (its owner, an approver or manager of an
# approval naming it, an admin); everyone else gets 404.
Reader = require_roles("requester", "approver", "manager", "admin")
# What the ERP records for the gateway's read rule (erp_readers), never shown to clients.
HIDDEN = {"session_id", "owner"}


@router.get("/v1/operations/{operation_id}", response_model_exclude_none=True)
async def get_operation(request: Request, operation_id: str, user: CurrentUser) -> OperationView:
    """Status of an operation: prepared, committed or rejected (owner or admin)."""
    status = await request.app.state.services.call(requests.ERP_OPERATION, GetOperationV1(operation_id=operation_id))
    if status.requested_by != user.sub and not user.has_any("admin"):
        raise Problem(404, "not_found", f"operation {operation_id} not found")
    return OperationView(operation_id=status.operation_id, tool=status.tool, status=status.status,
                         result=status.result, error=status.error, committed_at=status.committed_at)


@router.get("/v1/erp/products", dependencies=[Requester])
async def list_products(request: Request, q: str = "") -> ProductListV1:
    """Products whose SKU or name contains ``q`` (all when empty, at most 50)."""
    return await erp_readers.viewed(request.app.state.services, ErpViewV1(view="products", query=q), ProductListV1)


@router.get("/v1/erp/products/{sku}", dependencies=[Requester])
async def get_product(request: Request, sku: str) -> ProductV1:
    return await erp_readers.viewed(request.app.state.services, ErpViewV1(view="product", id=sku), ProductV1)


@router.patch("/v1/erp/products/{sku}", dependencies=[require_roles("admin")])
async def patch_product(request: Request, sku: str, body: ProductPatchBody, user: CurrentUser) -> ProductV1:
    """Back-office change of price or status (makes waiting quotes of that product stale)."""
    if body.price_minor is None and body.status is None:
        raise Problem(422, "invalid_body", "give price_minor, status or both")
    cmd = UpdateProductV1(sku=sku, price_minor=body.price_minor, status=body.status, updated_by=user.sub,
                          request_id=f"http-{uuid.uuid4().hex}")
    return await request.app.state.services.call(requests.ERP_UPDATE_PRODUCT, cmd)


@router.get("/v1/erp/customers", dependencies=[Requester])
async def list_customers(request: Request, q: str = "") -> CustomerListV1:
    return await erp_readers.viewed(request.app.state.services, ErpViewV1(view="customers", query=q), CustomerListV1)


@router.get("/v1/erp/orders/{order_id}", dependencies=[Reader], response_model_exclude=HIDDEN)
async def get_order(request: Request, order_id: str, user: CurrentUser) -> OrderV1:
    """One order, to the owner of the session it came from, an approver or manager who may decide an approval
    naming it (or its draft), or an admin; 404 to anyone else, as for an unknown id. Every requester reads an
    order no session made (the back office's history)."""
    return await erp_readers.shown(request.app.state.services, user, ErpViewV1(view="order", id=order_id), OrderV1)


@router.get("/v1/erp/drafts/{draft_id}", dependencies=[Reader], response_model_exclude=HIDDEN)
async def get_draft(request: Request, draft_id: str, user: CurrentUser, revision: int | None = None
                    ) -> DraftRevisionV1:
    """A draft (its latest revision, or ``revision``), to the owner of its session, an approver or manager who may
    decide an approval naming it, or an admin; 404 to anyone else, as for an unknown id."""
    view = ErpViewV1(view="draft", id=draft_id, revision=revision)
    return await erp_readers.shown(request.app.state.services, user, view, DraftRevisionV1)
