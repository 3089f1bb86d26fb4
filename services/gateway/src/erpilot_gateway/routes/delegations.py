"""Delegations (SPEC §10, §11): an approver or manager lets someone decide with their roles while away.

The approval service owns them (``cmd.approval.delegate``, ``cmd.approval.revoke_delegation``,
``query.approval.delegations``); like decisions, only the gateway may send those commands, always for the
authenticated person (sub and roles from the verified token).
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from erpilot_contracts import requests
from erpilot_contracts.approval.v1 import (
    DelegationPageV1,
    DelegationV1,
    GiveDelegationV1,
    ListDelegationsV1,
    RevokeDelegationV1,
)
from erpilot_gateway.auth import CurrentUser, require_roles
from erpilot_gateway.bodies import DelegationBody
from erpilot_gateway.problems import Problem
from erpilot_gateway.routes.approvals import _documented, strict_body

router = APIRouter(prefix="/v1/delegations", tags=["delegations"])
DelegationId = Annotated[str, Path(min_length=1, max_length=100)]


async def delegation_body(request: Request) -> DelegationBody:
    body = await strict_body(request, DelegationBody)
    if body.until.tzinfo is None:
        raise Problem(422, "invalid_until", "until needs a time zone, e.g. 2026-12-04T18:00:00Z")
    return body


@router.post("", status_code=201, dependencies=[require_roles("approver", "manager")],
             openapi_extra=_documented(DelegationBody))
async def give(request: Request, user: CurrentUser, body: Annotated[DelegationBody, Depends(delegation_body)]
               ) -> DelegationV1:
    """Let ``to`` decide with your deciding roles, for ``tools`` (absent: every write tool), until ``until``:
    201 ``{delegation_id, from, to, until, tools, roles, created_at, revoked_at}``. Refused 422: to yourself
    (``delegation_to_self``), ``until`` not in the future (``delegation_in_past``) or more than 90 days ahead
    (``delegation_too_long``), a chain (``delegation_chain``: you are someone's delegate, or ``to`` has delegated
    theirs)."""
    cmd = GiveDelegationV1(delegation_id=f"dlg_{uuid.uuid4().hex}", to=body.to, until=body.until, tools=body.tools,
                           actor=user.actor())
    return await request.app.state.services.call(requests.APPROVAL_DELEGATE, cmd)


@router.get("")
async def mine(request: Request, user: CurrentUser) -> DelegationPageV1:
    """Your delegations in force, given and received, newest first: ``{"items": [...]}``."""
    return await request.app.state.services.call(requests.APPROVAL_DELEGATIONS, ListDelegationsV1(actor=user.actor()))


@router.delete("/{delegation_id}", status_code=204)
async def revoke(request: Request, delegation_id: DelegationId, user: CurrentUser) -> Response:
    """End a delegation you gave, now: 204 (again: 204); an admin ends anyone's. Someone else's, or an unknown
    one: 404."""
    cmd = RevokeDelegationV1(delegation_id=delegation_id, actor=user.actor())
    await request.app.state.services.call(requests.APPROVAL_REVOKE_DELEGATION, cmd)
    return Response(status_code=204)
