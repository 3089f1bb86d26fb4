"""The delegations page (``GET /console/delegations``): your delegations in force, given and received, a form
to give one and a button to revoke each you gave (SPEC §10).

Server-rendered from ``query.approval.delegations`` for the signed-in person (a read: the cookie may do it). Giving
and revoking go through ``POST /v1/delegations`` and ``DELETE /v1/delegations/{id}`` with the bearer header that
the page's script builds (``static/delegations.js``), like every change the console makes: a cookie alone
changes nothing.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from erpilot_contracts import requests
from erpilot_contracts.approval.v1 import DelegationV1, ListDelegationsV1
from erpilot_gateway.auth import User
from erpilot_gateway.console import views
from erpilot_gateway.console.pages import DECIDER_ROLES, page, signin, viewer
from erpilot_gateway.problems import Problem

router = APIRouter(include_in_schema=False)
GIVER_ROLES = ("approver", "manager")


async def delegate_of_someone(request: Request, user: User) -> bool:
    """Whether this person holds a delegation in force (if the approval service cannot say: no)."""
    query = ListDelegationsV1(actor=user.actor())
    try:
        found = (await request.app.state.services.call(requests.APPROVAL_DELEGATIONS, query)).items
    except Problem:  # the port turns an unreachable service into a Problem too
        return False
    return any(delegation.to == user.sub for delegation in found)


def _row(delegation: DelegationV1) -> dict[str, str]:
    return {"delegation_id": delegation.delegation_id, "from": delegation.from_, "to": delegation.to,
            "until": views.iso(delegation.until), "until_text": views.when(delegation.until),
            "tools": ", ".join(delegation.tools) if delegation.tools is not None else "every write tool",
            "roles": ", ".join(delegation.roles)}


@router.get("/console/delegations")
async def delegations_page(request: Request) -> Response:
    """Give and revoke delegations; see the ones you received."""
    user, error = viewer(request)
    if user is None:
        return signin(request, next_path="/console/delegations", error=error,
                      heading="Sign in to manage your delegations")
    query = ListDelegationsV1(actor=user.actor())
    problem = None
    try:
        found = (await request.app.state.services.call(requests.APPROVAL_DELEGATIONS, query)).items
    except Problem as exc:
        found, problem = [], getattr(exc, "detail", None) or str(exc)
    return page(request, "delegations.html", {
        "user": user,
        "given": [_row(d) for d in found if d.from_ == user.sub],
        "received": [_row(d) for d in found if d.to == user.sub],
        "may_give": user.has_any(*GIVER_ROLES),
        "is_decider": user.has_any(*DECIDER_ROLES),
        "write_tools": views.WRITE_TOOLS,
        "problem": problem,
    })
