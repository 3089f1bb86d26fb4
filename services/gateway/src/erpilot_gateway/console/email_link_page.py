"""Approval email links (SPEC §11 "Approval channels"): ``GET`` shows what the link would decide and a confirm
button, deciding nothing (mail scanners follow links); the confirmation ``POST``s the token in the form body.

The gateway cannot read a link: the approval service signed it when it sent the mail and is the one to check it,
so both requests carry the token there as it came. No bearer token, no cookie: the link is the credential, for
one person, one action, one fingerprint, once, until the approval's deadline.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from erpilot_contracts import requests
from erpilot_contracts.approval.links import DecideByLinkV1, EmailLinkV1
from erpilot_gateway.console.pages import page, same_origin
from erpilot_gateway.problems import Problem

router = APIRouter(prefix="/v1/approvals", include_in_schema=False)
MAX_TOKEN = 2000
# What a refused link says, by the approval service's code.
HEADINGS = {"link_used": "This link was already used", "expired": "This link has expired",
            "superseded": "This approval was superseded", "already_decided": "This approval is already decided",
            "invalid_link": "This link is not valid", "not_found": "This approval does not exist"}


def _refused(request: Request, problem: Problem) -> Response:
    heading = HEADINGS.get(problem.code, "The decision was not recorded")
    return page(request, "email_decision.html", {"state": "refused", "heading": heading, "code": problem.code,
                                                 "detail": problem.detail}, problem.status)


@router.get("/{pending_id}/email-decision", include_in_schema=False)
async def email_link_page(request: Request, pending_id: str,
                          token: Annotated[str, Query(max_length=MAX_TOKEN)] = "") -> Response:
    """The confirmation page of an approval email's link; nothing is decided here."""
    try:
        view = await request.app.state.services.call(requests.APPROVAL_EMAIL_LINK,
                                                     EmailLinkV1(pending_id=pending_id, token=token))
    except Problem as problem:
        return _refused(request, problem)
    # The preview's fields as a table, in the order the ledger wrote them (fields a newer ledger added last).
    return page(request, "email_decision.html", {"state": "confirm", "view": view, "token": token,
                                                 "preview": view.preview.model_dump(mode="json")})


@router.post("/{pending_id}/email-decision", include_in_schema=False)
async def email_link_confirm(request: Request, pending_id: str) -> Response:
    """The person confirmed: decide as the link says, once."""
    if not same_origin(request):
        return _refused(request, Problem(403, "cross_site", "a confirmation is only accepted from its own page"))
    form = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=5)
    token = (form.get("token") or [""])[0][:MAX_TOKEN + 1]
    try:
        record = await request.app.state.services.call(requests.APPROVAL_DECIDE_BY_LINK,
                                                       DecideByLinkV1(pending_id=pending_id, token=token))
    except Problem as problem:
        return _refused(request, problem)
    except ValueError:  # a token over the contract's length: no link of ours
        return _refused(request, Problem(403, "invalid_link", "this link is not valid"))
    return page(request, "email_decision.html", {"state": "done", "record": record})
