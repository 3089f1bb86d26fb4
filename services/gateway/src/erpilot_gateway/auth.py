"""Bearer JWT (HS256) authentication: ``sub``, ``roles``, ``exp`` (SPEC §5), plus ``iss`` / ``aud``
when configured and a longest accepted lifetime (docs/OPERATIONS.md, "Security")."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

import jwt
from fastapi import Depends, Request

from erpilot_contracts.approval.v1 import Actor
from erpilot_gateway.problems import Problem

ROLES = ("requester", "approver", "manager", "admin")
TOKEN_COOKIE = "erpilot_token"


@dataclass(frozen=True)
class User:
    sub: str
    roles: tuple[str, ...]
    expires_at: float | None = None  # the token's ``exp`` (Unix seconds): what outlives a request ends there

    def has_any(self, *roles: str) -> bool:
        return any(role in self.roles for role in roles)

    def actor(self) -> Actor:
        """This person as the approval service is told: roles from the verified token, never from a body."""
        return Actor(sub=self.sub, roles=list(self.roles))


@dataclass(frozen=True)
class TokenRules:
    """How a token is verified: the HS256 secret, the optional issuer and audience, the longest lifetime."""

    secret: str
    issuer: str | None = None
    audience: str | None = None
    max_ttl_seconds: float = 24 * 3600.0


def decode_token(token: str, rules: TokenRules) -> User:
    """Verify signature, expiry, issuer and audience (when set) and lifetime; raise 401 Problem otherwise."""
    required = ["sub", "exp", *(["iss"] if rules.issuer else []), *(["aud"] if rules.audience else [])]
    try:
        claims = jwt.decode(token, rules.secret, algorithms=["HS256"], issuer=rules.issuer,
                            audience=rules.audience, options={"require": required,
                                                              "verify_aud": rules.audience is not None})
    except jwt.PyJWTError as exc:
        raise Problem(401, "unauthorized", f"invalid token: {exc}") from None
    _check_lifetime(claims, rules.max_ttl_seconds)
    roles = claims.get("roles", [])
    if not isinstance(claims["sub"], str) or not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise Problem(401, "unauthorized", "invalid token: malformed sub or roles")
    return User(sub=claims["sub"], roles=tuple(r for r in roles if r in ROLES), expires_at=float(claims["exp"]))


def _check_lifetime(claims: dict, max_ttl_seconds: float) -> None:
    """A token may live at most ``max_ttl_seconds``: from ``iat`` to ``exp``, or from now when it has no ``iat``.

    A stolen long-lived token is a standing key; refusing it bounds what a leak costs.
    """
    exp, iat = claims["exp"], claims.get("iat")
    if not isinstance(exp, int | float) or (iat is not None and not isinstance(iat, int | float)):
        raise Problem(401, "unauthorized", "invalid token: exp and iat must be numbers")
    lifetime = exp - (iat if iat is not None else time.time())
    if lifetime > max_ttl_seconds:
        raise Problem(401, "unauthorized", f"invalid token: it lives {lifetime:.0f}s, "
                                           f"longer than ERPILOT_AUTH_MAX_TTL ({max_ttl_seconds:.0f}s)")


def token_from(request: Request, *, allow_cookie: bool) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    if allow_cookie:
        return request.cookies.get(TOKEN_COOKIE)
    return None


async def current_user(request: Request) -> User:
    # async (pure CPU, no I/O): FastAPI runs a sync dependency in its thread pool, a thread hop per request
    token = token_from(request, allow_cookie=False)
    if not token:
        raise Problem(401, "unauthorized", "missing bearer token")
    return decode_token(token, request.app.state.auth_secret)


CurrentUser = Annotated[User, Depends(current_user)]


def require_roles(*roles: str):
    """A dependency that admits only users holding one of ``roles`` (roles have no hierarchy)."""

    async def check(user: CurrentUser) -> User:  # async: on the event loop, no thread hop
        if not user.has_any(*roles):
            raise Problem(403, "forbidden", f"requires one of the roles: {', '.join(roles)}")
        return user

    return Depends(check)
