"""Dev secrets and JWTs for the CLI."""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt

ALL_ROLES = ("requester", "approver", "manager", "admin")


def dev_auth_secret(data_dir: Path) -> str:
    """The dev-mode JWT secret under the data dir, created once (mode 0600) and shared by every process."""
    path = data_dir / "auth_secret"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(secrets.token_urlsafe(48))
        tmp.chmod(0o600)
        try:
            os.link(tmp, path)  # first writer wins; a concurrent one reads the winner's secret
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


def make_token(secret: str, sub: str, roles: list[str], ttl: timedelta = timedelta(hours=12), *,
               issuer: str | None = None, audience: str | None = None) -> str:
    """A JWT the gateway accepts; ``issuer`` / ``audience`` default to ERPILOT_AUTH_ISSUER / _AUDIENCE."""
    unknown = sorted(set(roles) - set(ALL_ROLES))
    if unknown:
        raise ValueError(f"unknown role(s) {', '.join(unknown)}; roles are {', '.join(ALL_ROLES)}")
    now = datetime.now(UTC)
    claims = {"sub": sub, "roles": list(dict.fromkeys(roles)), "iat": now, "exp": now + ttl}
    issuer = issuer or os.environ.get("ERPILOT_AUTH_ISSUER")
    audience = audience or os.environ.get("ERPILOT_AUTH_AUDIENCE")
    if issuer:
        claims["iss"] = issuer
    if audience:
        claims["aud"] = audience
    return jwt.encode(claims, secret, algorithm="HS256")
