"""The standing approvals page (``GET /console/standing-approvals``): the standing approvals in force you gave (an
admin: everyone's), each with a button to revoke it (SPEC §11, issue 34).

Server-rendered from ``query.approval.standing`` for the signed-in person (a read: the cookie may do it). Revoking
goes through ``DELETE /v1/standing-approvals/{id}`` with the bearer header the page's script builds
(``static/standing.js``), like every change the console makes: a cookie alone changes nothing. Giving one is
``POST /v1/standing-approvals`` (docs/GUIDE.md).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from erpilot_contracts import requests
from erpilot_contracts.approval.standing import ListStandingApprovalsV1, StandingApprovalV1
from erpilot_gateway.console import views
from erpilot_gateway.console.pages import page, signin, viewer
from erpilot_gateway.problems import Problem

router = APIRouter(include_in_schema=False)


def _row(standing: StandingApprovalV1) -> dict[str, str]:
    cap = standing.max_amount_minor
    return {"standing_id": standing.standing_id, "given_by": standing.given_by, "session_id": standing.session_id,
            "tool": standing.tool, "cap": f"{cap} minor units" if cap is not None else "any amount you may decide",
            "until": views.iso(standing.until), "until_text": views.when(standing.until)}


@router.get("/console/standing-approvals")
async def standing_page(request: Request) -> Response:
    """See and revoke the standing approvals you gave."""
    user, error = viewer(request)
    if user is None:
        return signin(request, next_path="/console/standing-approvals", error=error,
                      heading="Sign in to see your standing approvals")
    problem = None
    try:
        found = (await request.app.state.services.call(requests.APPROVAL_STANDING,
                                                       ListStandingApprovalsV1(actor=user.actor()))).items
    except Problem as exc:
        found, problem = [], getattr(exc, "detail", None) or str(exc)
    return page(request, "standing.html", {"user": user, "items": [_row(s) for s in found], "problem": problem,
                                           "is_admin": user.has_any("admin")})
