"""ERP read views, operation status for reconciliation, and the back-office product change."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request

from erpilot_contracts import requests
from erpilot_contracts.erp.v1 import ErpViewV1, GetOperationV1, UpdateProductV1
from erpilot_gateway import erp_readers
from erpilot_gateway.auth import CurrentUser, require_roles
from erpilot_gateway.bodies import ProductPatchBody
from erpilot_gateway.problems import Problem

router = APIRouter(tags=["erp"])
Requester = require_roles("requester")
# Drafts and orders: whoever erp_readers lets read that one (its owner, an approver or manager of an
# approval naming it, an admin); everyone else gets 404.
Reader = require_roles("requester", "approver", "manager", "admin")


async def _query(request: Request, view: ErpViewV1) -> dict:
    found = await request.app.state.services.call(requests.ERP_VIEW, view)
    return found.model_dump(mode="json")


@router.get("/v1/operations/{operation_id}")
async def get_operation(request: Request, operation_id: str, user: CurrentUser) -> dict:
    """Status of an operation: prepared, committed or rejected (owner or admin)."""
    status = await request.app.state.services.call(requests.ERP_OPERATION, GetOperationV1(operation_id=operation_id))
    if status.requested_by != user.sub and not user.has_any("admin"):
        raise Problem(404, "not_found", f"operation {operation_id} not found")
    shown = status.model_dump(mode="json", include={"result", "error", "committed_at"}, exclude_none=True)
    return {"operation_id": status.operation_id, "tool": status.tool, "status": status.status, **shown}


@router.get("/v1/erp/products", dependencies=[Requester])
async def list_products(request: Request, q: str = "") -> dict:
    """Products whose SKU or name contains ``q`` (all when empty, at most 50)."""
    return await _query(request, ErpViewV1(view="products", query=q))


@router.get("/v1/erp/products/{sku}", dependencies=[Requester])
async def get_product(request: Request, sku: str) -> dict:
    return await _query(request, ErpViewV1(view="product", id=sku))


@router.patch("/v1/erp/products/{sku}", dependencies=[require_roles("admin")])
async def patch_product(request: Request, sku: str, body: ProductPatchBody, user: CurrentUser) -> dict:
    """Back-office change of price or status (makes waiting quotes of that product stale)."""
    if body.price_minor is None and body.status is None:
        raise Problem(422, "invalid_body", "give price_minor, status or both")
    cmd = UpdateProductV1(sku=sku, price_minor=body.price_minor, status=body.status, updated_by=user.sub,
                          request_id=f"http-{uuid.uuid4().hex}")
    product = await request.app.state.services.call(requests.ERP_UPDATE_PRODUCT, cmd)
    return product.model_dump(mode="json")


@router.get("/v1/erp/customers", dependencies=[Requester])
async def list_customers(request: Request, q: str = "") -> dict:
    return await _query(request, ErpViewV1(view="customers", query=q))


@router.get("/v1/erp/orders/{order_id}", dependencies=[Reader])
async def get_order(request: Request, order_id: str, user: CurrentUser) -> dict:
    """One order, to the owner of the session it came from, an approver or manager who may decide an approval
    naming it (or its draft), or an admin; 404 to anyone else, as for an unknown id. Every requester reads an
    order no session made (the back office's history)."""
    return await erp_readers.shown(request.app.state.services, user, ErpViewV1(view="order", id=order_id))


@router.get("/v1/erp/drafts/{draft_id}", dependencies=[Reader])
async def get_draft(request: Request, draft_id: str, user: CurrentUser, revision: int | None = None) -> dict:
    """A draft (its latest revision, or ``revision``), to the owner of its session, an approver or manager who may
    decide an approval naming it, or an admin; 404 to anyone else, as for an unknown id."""
    view = ErpViewV1(view="draft", id=draft_id, revision=revision)
    return await erp_readers.shown(request.app.state.services, user, view)
