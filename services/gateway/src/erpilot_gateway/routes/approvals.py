"""Approvals: list, read, decide, edit. Only people decide, and only through here."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import Actor, DecideV1, EditApprovalV1, GetApprovalV1, ListApprovalsV1
from erpilot_gateway.auth import CurrentUser, User, require_roles
from erpilot_gateway.bodies import DecisionBody, EditBody

router = APIRouter(prefix="/v1/approvals", tags=["approvals"])
Status = Literal["pending", "approved", "rejected", "cancelled", "expired", "superseded"]


def actor(user: User) -> Actor:
    return Actor(sub=user.sub, roles=list(user.roles))


@router.get("", dependencies=[require_roles("approver", "manager", "admin")])
async def list_approvals(request: Request, user: CurrentUser, status: Status | None = None,
                         session_id: str | None = None) -> dict:
    """Approvals this person may decide, newest first."""
    query = ListApprovalsV1(actor=actor(user), status=status, session_id=session_id)
    return await request.app.state.services.query(subjects.APPROVAL_QUERY_LIST, query)


@router.get("/{pending_id}")
async def get_approval(request: Request, pending_id: str, user: CurrentUser) -> dict:
    """One approval with its decision, for those who may decide it and for the requester."""
    query = GetApprovalV1(pending_id=pending_id, actor=actor(user))
    return await request.app.state.services.query(subjects.APPROVAL_QUERY_GET, query)


@router.post("/{pending_id}/decision")
async def decide(request: Request, pending_id: str, body: DecisionBody, user: CurrentUser) -> dict:
    """Approve, reject or cancel exactly the operation whose fingerprint you were shown."""
    cmd = DecideV1(pending_id=pending_id, action=body.action, fingerprint=body.fingerprint,
                   comment=body.comment, actor=actor(user))
    return await request.app.state.services.command(subjects.APPROVAL_CMD_DECIDE, cmd)


@router.post("/{pending_id}/edit", status_code=201)
async def edit(request: Request, pending_id: str, body: EditBody, user: CurrentUser) -> dict:
    """Replace the arguments: a new pending version with a new fingerprint supersedes this one."""
    cmd = EditApprovalV1(pending_id=pending_id, fingerprint=body.fingerprint, arguments=body.arguments,
                         actor=actor(user))
    return await request.app.state.services.command(subjects.APPROVAL_CMD_EDIT, cmd)
