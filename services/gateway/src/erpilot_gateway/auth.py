"""Bearer JWT (HS256) authentication: ``sub``, ``roles``, ``exp`` (SPEC §5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import jwt
from fastapi import Depends, Request

from erpilot_gateway.problems import Problem

ROLES = ("requester", "approver", "manager", "admin")
TOKEN_COOKIE = "erpilot_token"


@dataclass(frozen=True)
class User:
    sub: str
    roles: tuple[str, ...]

    def has_any(self, *roles: str) -> bool:
        return any(role in self.roles for role in roles)


def decode_token(token: str, secret: str) -> User:
    """Verify signature and expiry; raise 401 Problem otherwise."""
    try:
        claims = jwt.decode(token, secret, algorithms=["HS256"], options={"require": ["sub", "exp"]})
    except jwt.PyJWTError as exc:
        raise Problem(401, "unauthorized", f"invalid token: {exc}") from None
    roles = claims.get("roles", [])
    if not isinstance(claims["sub"], str) or not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise Problem(401, "unauthorized", "invalid token: malformed sub or roles")
    return User(sub=claims["sub"], roles=tuple(r for r in roles if r in ROLES))


def token_from(request: Request, *, allow_cookie: bool) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    if allow_cookie:
        return request.cookies.get(TOKEN_COOKIE)
    return None


def current_user(request: Request) -> User:
    token = token_from(request, allow_cookie=False)
    if not token:
        raise Problem(401, "unauthorized", "missing bearer token")
    return decode_token(token, request.app.state.auth_secret)


CurrentUser = Annotated[User, Depends(current_user)]


def require_roles(*roles: str):
    """A dependency that admits only users holding one of ``roles`` (roles have no hierarchy)."""

    def check(user: CurrentUser) -> User:
        if not user.has_any(*roles):
            raise Problem(403, "forbidden", f"requires one of the roles: {', '.join(roles)}")
        return user

    return Depends(check)
