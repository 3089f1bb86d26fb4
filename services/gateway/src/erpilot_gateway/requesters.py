"""Requester assertions (SPEC §10): the gateway vouches for the person behind every command it sends to the agent.

The agent runs the model and is the least trusted service: it forwards the assertion unchanged to the ERP and the
approval service, which accept a requester only with it. The person is the verified JWT's ``sub`` with its roles,
in the session the command is for; only the gateway holds the signing key (``ERPILOT_ASSERTION_SIGNING_KEY``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_gateway.auth import User
from erpilot_platform.assertions import DEFAULT_TTL, sign_assertion


class RequesterAssertions:
    """Signs one assertion per command: ``sub`` and ``roles`` of the caller, ``session_id`` of the command."""

    def __init__(self, key: Ed25519PrivateKey, *, ttl: timedelta = DEFAULT_TTL):
        self.key = key
        self.ttl = ttl

    def vouch(self, user: User, session_id: str, *, now: datetime | None = None) -> str:
        """Valid ``ttl`` from now, never past the token's own ``exp``: the gateway vouches for no longer than the
        identity provider did (a run started with a token about to expire cannot act in that name for an hour)."""
        now = (now or datetime.now(UTC)).replace(microsecond=0)
        ttl = self.ttl
        if user.expires_at is not None:
            ttl = min(ttl, datetime.fromtimestamp(int(user.expires_at), UTC) - now)
        return sign_assertion(self.key, sub=user.sub, roles=user.roles, session_id=session_id, now=now, ttl=ttl)
