"""Approvals: list, read, decide, edit. Only people decide, and only through here.

The decision and edit bodies are parsed strictly by hand (``strict_body``) rather than by FastAPI:
a non-JSON content type is 422 like any body the models refuse; JSON with a duplicate key (which value
would win?), ``NaN``/``Infinity`` or deep nesting is 400 ``invalid_json`` (``json_input``, also checked
by ``input_guard`` for every body); nothing is sent to the approval service.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from erpilot_contracts import json_input, requests
from erpilot_contracts.approval.v1 import (
    ApprovalPageV1,
    ApprovalRecordV1,
    DecideManyV1,
    DecideV1,
    DecisionItemV1,
    DecisionsV1,
    EditApprovalV1,
    GetApprovalV1,
    ListApprovalsV1,
)
from erpilot_gateway.auth import CurrentUser
from erpilot_gateway.bodies import BulkDecisionBody, DecisionBody, EditBody
from erpilot_gateway.problems import Problem
from erpilot_gateway.query_times import Since

router = APIRouter(prefix="/v1/approvals", tags=["approvals"])
Status = Literal["pending", "approved", "rejected", "cancelled", "expired", "superseded", "withdrawn"]
B = TypeVar("B", bound=BaseModel)


def _invalid(msg: str, type_: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body",), "msg": msg, "type": type_}])


async def strict_body(request: Request, model: type[B]) -> B:
    """The body as ``model``: JSON only (400 ``invalid_json`` for duplicate keys, NaN, deep nesting, ...),
    then the model's own checks (422)."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type and media_type != "application/json" and not media_type.endswith("+json"):
        raise _invalid(f"the body must be application/json, not {media_type}", "content_type")
    try:  # input_guard has checked the body already; this keeps the route safe on its own
        data = json_input.loads(await request.body())
    except json_input.BadInput as exc:
        raise Problem(exc.status, exc.code, str(exc)) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


async def decision_body(request: Request) -> DecisionBody:
    return await strict_body(request, DecisionBody)


async def bulk_decision_body(request: Request) -> BulkDecisionBody:
    return await strict_body(request, BulkDecisionBody)


async def edit_body(request: Request) -> EditBody:
    return await strict_body(request, EditBody)


def _documented(model: type[BaseModel]) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}


@router.get("")
async def list_approvals(request: Request, user: CurrentUser, since: Since, status: Status | None = None,
                         session_id: str | None = None, tool: str | None = None, requested_by: str | None = None,
                         cursor: Annotated[str | None, Query(max_length=200)] = None,
                         limit: Annotated[int, Query(ge=1, le=500)] = 100) -> ApprovalPageV1:
    """Approvals this person may decide (holds a required role for, or a delegator's role as their delegate:
    ``can_decide_for``), newest first; ``status`` defaults to ``pending``; ``tool``, ``requested_by``,
    ``session_id`` and ``since`` (created at or after, ISO 8601 with a zone) narrow it; ``next_cursor`` of the
    answer, passed as ``cursor``, gives the next page. Anyone signed in may ask: without a deciding role or a
    delegation in force the list is empty."""
    query = ListApprovalsV1(actor=user.actor(), status=status, session_id=session_id, tool=tool,
                            requested_by=requested_by, since=since, cursor=cursor, limit=limit)
    return await request.app.state.services.call(requests.APPROVAL_LIST, query)


@router.post("/decisions", openapi_extra=_documented(BulkDecisionBody))
async def decide_many(request: Request, user: CurrentUser,
                      body: Annotated[BulkDecisionBody, Depends(bulk_decision_body)]) -> DecisionsV1:
    """One action on several approvals in one transaction: all are decided or none; a refusal names the
    first failing item (``pending_id``, ``index``) with its own code."""
    cmd = DecideManyV1(action=body.action, comment=body.comment, actor=user.actor(),
                       items=[DecisionItemV1(pending_id=i.pending_id, fingerprint=i.fingerprint) for i in body.items])
    return await request.app.state.services.call(requests.APPROVAL_DECIDE_MANY, cmd)


@router.get("/{pending_id}")
async def get_approval(request: Request, pending_id: str, user: CurrentUser) -> ApprovalRecordV1:
    """One approval with its decision, for those who may decide it, the requester, and admins."""
    query = GetApprovalV1(pending_id=pending_id, actor=user.actor())
    return await request.app.state.services.call(requests.APPROVAL_GET, query)


@router.post("/{pending_id}/decision", openapi_extra=_documented(DecisionBody))
async def decide(request: Request, pending_id: str, user: CurrentUser,
                 body: Annotated[DecisionBody, Depends(decision_body)]) -> ApprovalRecordV1:
    """Approve, reject or cancel exactly the operation whose fingerprint you were shown."""
    cmd = DecideV1(pending_id=pending_id, action=body.action, fingerprint=body.fingerprint,
                   comment=body.comment, actor=user.actor())
    return await request.app.state.services.call(requests.APPROVAL_DECIDE, cmd)


@router.post("/{pending_id}/edit", status_code=201, openapi_extra=_documented(EditBody))
async def edit(request: Request, pending_id: str, user: CurrentUser,
               body: Annotated[EditBody, Depends(edit_body)]) -> ApprovalRecordV1:
    """Replace the arguments: a new pending version with a new fingerprint supersedes this one."""
    cmd = EditApprovalV1(pending_id=pending_id, fingerprint=body.fingerprint, arguments=body.arguments,
                         actor=user.actor())
    return await request.app.state.services.call(requests.APPROVAL_EDIT, cmd)
