"""Console pages: the console itself, sign-in/out and static files (the approval page is
``console.approval_page``; what the pages share, authentication included, is ``console.pages``)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from erpilot_gateway.auth import TOKEN_COOKIE, decode_token
from erpilot_gateway.console import approval_page, delegations_page, email_link_page, standing_page
from erpilot_gateway.console.delegations_page import delegate_of_someone
from erpilot_gateway.console.pages import (
    DECIDER_ROLES,
    STATIC,
    STATIC_FILES,
    from_this_site,
    local_path,
    page,
    set_token_cookie,
    signin,
    viewer,
)
from erpilot_gateway.problems import Problem, problem_response

router = APIRouter(include_in_schema=False)


@router.get("/")
async def console(request: Request, token: str | None = None) -> Response:
    """The console. ``/?token=…`` (printed by ``erpilot up``) signs in and drops the token from the URL.

    The answer sets the cookie on a page whose script replaces the link in the browser's history before
    it opens the console, so the token stays neither in the address bar nor in history; the access log
    and the trace redact it (``redact_secrets``).
    """
    if token is not None:
        if not from_this_site(request):
            return signin(request, next_path="/", status=403,
                           error="That sign-in link was opened from another site. Paste the token here instead.")
        try:
            decode_token(token, request.app.state.auth_secret)
        except Problem:
            return signin(request, next_path="/", error="The token in the link is invalid or has expired.")
        response = page(request, "signed_in.html", {})
        response.headers["Referrer-Policy"] = "no-referrer"
        set_token_cookie(request, response, token)
        return response
    user, error = viewer(request)
    if user is None:
        return signin(request, next_path="/", error=error, status=200 if error is None else 401)
    return page(request, "console.html", {
        "user": user,
        "roles_json": json.dumps(list(user.roles)),
        "is_requester": user.has_any("requester"),
        # A delegate without a deciding role of their own decides their delegators' approvals in the inbox too.
        "is_decider": user.has_any(*DECIDER_ROLES) or await delegate_of_someone(request, user),
    })


@router.post("/console/sign-in")
async def sign_in(request: Request) -> Response:
    """Form post of a pasted token: checked here, then kept in the ``erpilot_token`` cookie."""
    if not from_this_site(request):
        return problem_response(403, "forbidden", "sign-in must come from this site")
    form = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    token = (form.get("token") or [""])[0].strip()
    next_path = local_path((form.get("next") or ["/"])[0])
    if token.lower().startswith("bearer "):
        token = token[7:].strip()
    if not token:
        return signin(request, next_path=next_path, error="Paste a token to sign in.")
    try:
        decode_token(token, request.app.state.auth_secret)
    except Problem:
        return signin(request, next_path=next_path, error="That token is invalid or has expired.")
    response = RedirectResponse(next_path, status_code=303)
    set_token_cookie(request, response, token)
    return response


@router.post("/console/sign-out")
async def sign_out(request: Request) -> Response:
    if not from_this_site(request):
        return problem_response(403, "forbidden", "sign-out must come from this site")
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(TOKEN_COOKIE, path="/", samesite="lax")
    return response


@router.get("/console/static/{name}")
async def static(name: str) -> Response:
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        return problem_response(404, "not_found", f"no static file {name}")
    return FileResponse(STATIC / name, media_type=media_type,
                        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})


@router.get("/favicon.ico")
async def favicon() -> Response:
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


router.include_router(approval_page.router)
router.include_router(delegations_page.router)
router.include_router(standing_page.router)
router.include_router(email_link_page.router)
