"""Console pages, sign-in/out, static files and the approval page.

Authentication. The ``erpilot_token`` cookie holds the same JWT as the API's bearer header. The gateway
accepts the cookie only on reads that a browser cannot make with a header: this approval page, its
status poll and the session event stream. Every change (messages, decisions) goes through the
``/v1`` API with ``Authorization: Bearer``, which the console's script builds from the cookie; a
cross-site page can make a browser send the cookie but never that header, so a cookie alone decides
nothing. That is why the cookie is not HttpOnly: the page's own script must read it. The strict CSP
(no inline script, scripts only from this origin) and rendering every model- or user-supplied string
as text are what keep other scripts from reading it.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import Actor, GetApprovalV1
from erpilot_contracts.erp.v1 import GetOperationV1
from erpilot_gateway.auth import TOKEN_COOKIE, User, decode_token, token_from
from erpilot_gateway.console import views
from erpilot_gateway.problems import Problem, problem_response
from erpilot_platform.broker import ServiceUnavailable

HERE = Path(__file__).parent
STATIC = HERE / "static"
STATIC_FILES = {
    "console.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "approval.js": "text/javascript; charset=utf-8",
    "signed-in.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
DECIDER_ROLES = ("approver", "manager", "admin")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; manifest-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # /?token=… never leaks to another site in a Referer
    "Cache-Control": "no-store",
}

templates = Jinja2Templates(directory=HERE / "templates")  # autoescapes .html
templates.env.filters["money"] = views.money
templates.env.filters["when"] = views.when
templates.env.filters["iso"] = views.iso

router = APIRouter(include_in_schema=False)


# --- helpers ------------------------------------------------------------------------------------------


def _page(request: Request, template: str, context: dict[str, Any], status: int = 200) -> Response:
    base = {"server_now": datetime.now(UTC).isoformat(timespec="milliseconds"), "user": None}
    response = templates.TemplateResponse(request, template, {**base, **context}, status_code=status)
    response.headers.update(PAGE_HEADERS)
    return response


def _viewer(request: Request) -> tuple[User | None, str | None]:
    """The signed-in person (header or cookie) or None, with a reason when a token was given but is bad."""
    token = token_from(request, allow_cookie=True)
    if not token:
        return None, None
    try:
        return decode_token(token, request.app.state.auth_secret), None
    except Problem:
        return None, "Your token is invalid or has expired. Paste a current one."


def _local_path(target: str | None) -> str:
    """Only a path on this site may be a redirect target (no scheme, no host, no ``//``)."""
    if not target or not target.startswith("/") or target.startswith("//") or target.startswith("/\\"):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return "/"
    return target


def _same_origin(request: Request) -> bool:
    """A browser form post from another site carries its Origin: refuse it (login CSRF)."""
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return urlsplit(origin).netloc == host


def _from_this_site(request: Request) -> bool:
    """Sign-in and sign-out only from this site, or typed/pasted by the person (login CSRF).

    A link or form on another site would sign the victim in as the attacker: a browser names such a
    request by its Origin (form posts) or ``Sec-Fetch-Site`` (every request, navigations included).
    Requests without either header (curl, old browsers) cannot be told apart and are let through.
    """
    return _same_origin(request) and request.headers.get("sec-fetch-site") not in ("cross-site", "same-site")


def _set_token_cookie(request: Request, response: Response, token: str) -> None:
    claims = jwt.decode(token, options={"verify_signature": False})
    max_age = max(0, int(claims.get("exp", 0) - time.time()))
    response.set_cookie(TOKEN_COOKIE, token, max_age=max_age, path="/", samesite="lax",
                        secure=request.url.scheme == "https", httponly=False)


def _signin(request: Request, *, next_path: str, error: str | None = None, heading: str | None = None,
            status: int = 401) -> Response:
    return _page(request, "signin.html", {"next": next_path, "error": error,
                                          "heading": heading or "Sign in to Erpilot"}, status)


def _actor(user: User) -> Actor:
    return Actor(sub=user.sub, roles=list(user.roles))


async def _operation(request: Request, record: dict[str, Any]) -> dict[str, Any] | None:
    """The ERP's status of the approval's operation, for anyone who may see the approval.

    The approver usually does not own the requester's session (so not the tool call, nor the
    owner-only ``/v1/operations``); seeing the result of the very operation they may decide is no more
    than the approval itself shows, so it is read here with the approval as the permission.
    """
    if record.get("status") != "approved":
        return None
    try:
        return await request.app.state.services.query(
            subjects.ERP_QUERY_OPERATION, GetOperationV1(operation_id=record["operation_id"]))
    except (Problem, ServiceUnavailable):
        return None


async def _approval(request: Request, user: User, pending_id: str) -> dict[str, Any]:
    return await request.app.state.services.query(
        subjects.APPROVAL_QUERY_GET, GetApprovalV1(pending_id=pending_id, actor=_actor(user)))


def _verdict(record: dict[str, Any], user: User) -> tuple[bool, str | None]:
    """May this person approve, and if not why: the approval service's answer for them (``can_decide``).

    An approval service that predates the field answers without it; then the page falls back to what it
    can tell itself (role, status, deadline) and leaves separation of duties to the decision's 403.
    """
    if isinstance(record.get("can_decide"), bool):
        return record["can_decide"], None if record["can_decide"] else record.get("cannot_decide_reason")
    expires_at = views.parse_time(record.get("expires_at"))
    if not any(role in (record.get("required_roles") or []) for role in user.roles):
        return False, "role"
    if record.get("status") != "pending":
        return False, {"expired": "expired", "superseded": "superseded"}.get(record.get("status"), "already_decided")
    if expires_at is not None and datetime.now(UTC) >= expires_at:
        return False, "expired"
    return True, None


def _state(record: dict[str, Any], operation: dict[str, Any] | None) -> dict[str, Any]:
    return {"pending_id": record["pending_id"], "status": record["status"],
            "expires_at": views.iso(record["expires_at"]),
            "decision": views.decision_view(record), "outcome": views.outcome_view(record, operation),
            **views.quorum_view(record)}


# --- console --------------------------------------------------------------------------------------------


@router.get("/")
async def console(request: Request, token: str | None = None) -> Response:
    """The console. ``/?token=…`` (printed by ``erpilot up``) signs in and drops the token from the URL.

    The answer sets the cookie on a page whose script replaces the link in the browser's history before
    it opens the console, so the token stays neither in the address bar nor in history; the access log
    and the trace redact it (``redact_secrets``).
    """
    if token is not None:
        if not _from_this_site(request):
            return _signin(request, next_path="/", status=403,
                           error="That sign-in link was opened from another site. Paste the token here instead.")
        try:
            decode_token(token, request.app.state.auth_secret)
        except Problem:
            return _signin(request, next_path="/", error="The token in the link is invalid or has expired.")
        response = _page(request, "signed_in.html", {})
        response.headers["Referrer-Policy"] = "no-referrer"
        _set_token_cookie(request, response, token)
        return response
    user, error = _viewer(request)
    if user is None:
        return _signin(request, next_path="/", error=error, status=200 if error is None else 401)
    return _page(request, "console.html", {
        "user": user,
        "roles_json": json.dumps(list(user.roles)),
        "is_requester": user.has_any("requester"),
        "is_decider": user.has_any(*DECIDER_ROLES),
    })


@router.post("/console/sign-in")
async def sign_in(request: Request) -> Response:
    """Form post of a pasted token: checked here, then kept in the ``erpilot_token`` cookie."""
    if not _from_this_site(request):
        return problem_response(403, "forbidden", "sign-in must come from this site")
    form = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    token = (form.get("token") or [""])[0].strip()
    next_path = _local_path((form.get("next") or ["/"])[0])
    if token.lower().startswith("bearer "):
        token = token[7:].strip()
    if not token:
        return _signin(request, next_path=next_path, error="Paste a token to sign in.")
    try:
        decode_token(token, request.app.state.auth_secret)
    except Problem:
        return _signin(request, next_path=next_path, error="That token is invalid or has expired.")
    response = RedirectResponse(next_path, status_code=303)
    _set_token_cookie(request, response, token)
    return response


@router.post("/console/sign-out")
async def sign_out(request: Request) -> Response:
    if not _from_this_site(request):
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


# --- approval page ----------------------------------------------------------------------------------------


@router.get("/resume/{pending_id}")
async def approval_page(request: Request, pending_id: str) -> Response:
    """The approval page (SPEC §5): everything the decision binds to, and approve / reject."""
    user, error = _viewer(request)
    next_path = f"/resume/{pending_id}"
    if user is None:
        return _signin(request, next_path=next_path, error=error, heading="Sign in to review this approval")
    try:
        record = await _approval(request, user, pending_id)
    except Problem as exc:
        if exc.status in (403, 404):
            return _page(request, "approval_denied.html", {"user": user, "pending_id": pending_id}, 404)
        return _page(request, "approval_error.html", {"user": user, "pending_id": pending_id,
                                                      "code": exc.code, "detail": exc.detail}, exc.status)
    except ServiceUnavailable as exc:
        return _page(request, "approval_error.html", {"user": user, "pending_id": pending_id,
                                                      "code": "service_unavailable", "detail": str(exc)}, 503)
    operation = await _operation(request, record)
    preview = record.get("preview") or {}
    details = preview.get("details") or {}
    can_decide, reason = _verdict(record, user)
    return _page(request, "approval.html", {
        "user": user,
        "record": record,
        "preview": preview,
        "amount": views.money(preview.get("amount_minor"), preview.get("currency")),
        "effects": views.effect_rows(preview),
        "notes": [str(n) for n in preview.get("notes") or []],
        "draft": views.draft_view(details, preview.get("currency")) if record.get("tool") == "submit_order" else None,
        "other_details": views.other_details(details, preview.get("currency")),
        "arguments_json": views.pretty_json(record.get("arguments")),
        "decision": views.decision_view(record),
        "outcome": views.outcome_view(record, operation),
        "can_decide": can_decide,
        "cannot_decide_reason": reason,
        "cannot_decide_text": views.cannot_decide_text(reason, record.get("required_roles") or [], list(user.roles)),
        "state_json": json.dumps(_state(record, operation)),
    })


@router.get("/resume/{pending_id}/status")
async def approval_status(request: Request, pending_id: str) -> JSONResponse:
    """What the approval page polls: the decision and, once approved, the business outcome."""
    user, _ = _viewer(request)
    if user is None:
        return problem_response(401, "unauthorized", "sign in first", request.url.path)
    record = await _approval(request, user, pending_id)
    operation = await _operation(request, record)
    return JSONResponse(_state(record, operation), headers={"Cache-Control": "no-store"})
