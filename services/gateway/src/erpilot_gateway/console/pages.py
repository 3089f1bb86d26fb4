"""What every console page shares: the page headers (a strict CSP), the templates, who is viewing, the
sign-in page and the token cookie; the routes are in ``console.routes`` and ``console.approval_page``.

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

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jwt
from fastapi import Request
from fastapi.responses import Response
from fastapi.templating import Jinja2Templates

from erpilot_gateway.auth import TOKEN_COOKIE, User, decode_token, token_from
from erpilot_gateway.console import views
from erpilot_gateway.problems import Problem

HERE = Path(__file__).parent
STATIC = HERE / "static"
STATIC_FILES = {
    "console.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "results.js": "text/javascript; charset=utf-8",
    "approval.js": "text/javascript; charset=utf-8",
    "delegations.js": "text/javascript; charset=utf-8",
    "standing.js": "text/javascript; charset=utf-8",
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


def page(request: Request, template: str, context: dict[str, Any], status: int = 200) -> Response:
    base = {"server_now": datetime.now(UTC).isoformat(timespec="milliseconds"), "user": None}
    response = templates.TemplateResponse(request, template, {**base, **context}, status_code=status)
    response.headers.update(PAGE_HEADERS)
    return response


def viewer(request: Request) -> tuple[User | None, str | None]:
    """The signed-in person (header or cookie) or None, with a reason when a token was given but is bad."""
    token = token_from(request, allow_cookie=True)
    if not token:
        return None, None
    try:
        return decode_token(token, request.app.state.auth_secret), None
    except Problem:
        return None, "Your token is invalid or has expired. Paste a current one."


def local_path(target: str | None) -> str:
    """Only a path on this site may be a redirect target (no scheme, no host, no ``//``)."""
    if not target or not target.startswith("/") or target.startswith("//") or target.startswith("/\\"):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return "/"
    return target


def same_origin(request: Request) -> bool:
    """A browser form post from another site carries its Origin: refuse it (login CSRF)."""
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return urlsplit(origin).netloc == host


def from_this_site(request: Request) -> bool:
    """Sign-in and sign-out only from this site, or typed/pasted by the person (login CSRF).

    A link or form on another site would sign the victim in as the attacker: a browser names such a
    request by its Origin (form posts) or ``Sec-Fetch-Site`` (every request, navigations included).
    Requests without either header (curl, old browsers) cannot be told apart and are let through.
    """
    return same_origin(request) and request.headers.get("sec-fetch-site") not in ("cross-site", "same-site")


def set_token_cookie(request: Request, response: Response, token: str) -> None:
    claims = jwt.decode(token, options={"verify_signature": False})
    max_age = max(0, int(claims.get("exp", 0) - time.time()))
    response.set_cookie(TOKEN_COOKIE, token, max_age=max_age, path="/", samesite="lax",
                        secure=request.url.scheme == "https", httponly=False)


def signin(request: Request, *, next_path: str, error: str | None = None, heading: str | None = None,
            status: int = 401) -> Response:
    return page(request, "signin.html", {"next": next_path, "error": error,
                                          "heading": heading or "Sign in to Erpilot"}, status)
