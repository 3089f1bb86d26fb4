"""Requester assertions (SPEC §10): the gateway vouches for the person behind every command it sends to the agent.

The agent runs the model and is the least trusted service: it forwards the assertion unchanged to the ERP and the
approval service, which accept a requester only with it. The person is the verified JWT's ``sub`` with its roles,
in the session the command is for; only the gateway holds the signing key (``ERPILOT_ASSERTION_SIGNING_KEY``).
"""

from __future__ import annotations

from datetime import timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_gateway.auth import User
from erpilot_platform.assertions import DEFAULT_TTL, sign_assertion


class RequesterAssertions:
    """Signs one assertion per command: ``sub`` and ``roles`` of the caller, ``session_id`` of the command."""

    def __init__(self, key: Ed25519PrivateKey, *, ttl: timedelta = DEFAULT_TTL):
        self.key = key
        self.ttl = ttl

    def vouch(self, user: User, session_id: str) -> str:
        return sign_assertion(self.key, sub=user.sub, roles=user.roles, session_id=session_id, ttl=self.ttl)
