"""Standing approvals (SPEC §11, issue 34): an approver or manager approves in advance one write tool in one
session, up to an amount, until a time.

The approval service owns them (``cmd.approval.stand``, ``cmd.approval.revoke_standing``,
``query.approval.standing``) and checks what the giver may decide; like decisions, only the gateway may send those
commands, always for the authenticated person (sub and roles from the verified token, never from the body).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import Field, field_validator

from erpilot_contracts import requests
from erpilot_contracts.approval.standing import (
    GiveStandingApprovalV1,
    ListStandingApprovalsV1,
    RevokeStandingApprovalV1,
    StandingApprovalPageV1,
    StandingApprovalV1,
)
from erpilot_gateway.auth import CurrentUser, require_roles
from erpilot_gateway.bodies import Body
from erpilot_gateway.problems import Problem
from erpilot_gateway.requesters import owner_bound
from erpilot_gateway.routes.approvals import _documented, strict_body

router = APIRouter(prefix="/v1/standing-approvals", tags=["standing approvals"])
StandingId = Annotated[str, Path(min_length=1, max_length=100)]


class StandingApprovalBody(Body):
    """Approve in advance the writes of ``tool`` in ``session_id`` whose ledger preview shows at most
    ``max_amount_minor`` (absent: any amount you may decide) until ``until`` (ISO 8601 with a time zone)."""

    session_id: Annotated[str, Field(min_length=1, max_length=100)]
    tool: Annotated[str, Field(min_length=1, max_length=64)]
    max_amount_minor: Annotated[int, Field(le=2**53 - 1)] | None = None  # negative: the approval service's 422
    until: Annotated[datetime, Field(strict=False)]

    @field_validator("until", mode="before")
    @classmethod
    def _iso_text(cls, value: object) -> object:
        if not isinstance(value, str):  # lax datetime parsing would take a number as a Unix time
            raise ValueError("until is an ISO 8601 date and time with a zone, as a string")
        return value


async def standing_body(request: Request) -> StandingApprovalBody:
    body = await strict_body(request, StandingApprovalBody)
    if body.until.tzinfo is None:
        raise Problem(422, "invalid_until", "until needs a time zone, e.g. 2026-12-04T18:00:00Z")
    return body


@router.post("", status_code=201, dependencies=[require_roles("approver", "manager")],
             openapi_extra=_documented(StandingApprovalBody))
async def give(request: Request, user: CurrentUser,
               body: Annotated[StandingApprovalBody, Depends(standing_body)]) -> StandingApprovalV1:
    """Approve in advance: 201 ``{standing_id, given_by, session_id, tool, max_amount_minor, until, roles,
    created_at, revoked_at}``; each write it covers is approved at once, ``decided_by`` ``standing:<id>`` on your
    behalf. Refused 422: ``unknown_tool``, ``not_a_write_tool``, ``approval_not_required``, ``invalid_amount``
    (negative), ``standing_in_past``, ``standing_too_long`` (over 90 days); 403 ``standing_beyond_authority`` (a
    tool, or an amount up to the cap, you may not decide), ``session_predates_standing_approvals`` (a session id
    from before the gateway bound sessions to their owner)."""
    if not owner_bound(body.session_id):
        # Only a session whose owner the gateway bound itself: a legacy session's owner is the agent's word, and a
        # standing approval must cover only what its session's true owner asked for.
        raise Problem(422, "session_predates_standing_approvals",
                      f"session {body.session_id} was started before standing approvals; start a new session")
    cmd = GiveStandingApprovalV1(standing_id=f"sa_{uuid.uuid4().hex}", session_id=body.session_id, tool=body.tool,
                                 max_amount_minor=body.max_amount_minor, until=body.until, actor=user.actor())
    return await request.app.state.services.call(requests.APPROVAL_STAND, cmd)


@router.get("")
async def mine(request: Request, user: CurrentUser) -> StandingApprovalPageV1:
    """The standing approvals in force you gave (an admin: everyone's), newest first: ``{"items": [...]}``."""
    query = ListStandingApprovalsV1(actor=user.actor())
    return await request.app.state.services.call(requests.APPROVAL_STANDING, query)


@router.delete("/{standing_id}", status_code=204)
async def revoke(request: Request, standing_id: StandingId, user: CurrentUser) -> Response:
    """End a standing approval you gave, now: 204 (again: 204); an admin ends anyone's. Someone else's, or an
    unknown one: 404."""
    cmd = RevokeStandingApprovalV1(standing_id=standing_id, actor=user.actor())
    await request.app.state.services.call(requests.APPROVAL_REVOKE_STANDING, cmd)
    return Response(status_code=204)
