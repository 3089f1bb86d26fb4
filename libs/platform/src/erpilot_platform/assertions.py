"""Requester assertions (SPEC §10): the gateway vouches for the person behind a command it sends to the agent.

An assertion is a compact JWS (PyJWT, ``EdDSA``: Ed25519) with the claims ``sub``, ``roles``, ``session_id``,
``iat`` and ``exp``. The gateway signs it with ``ERPILOT_ASSERTION_SIGNING_KEY`` for every command it sends to the
agent; the agent stores it and forwards it unchanged; the ERP (prepare, draft) and the approval service (request,
withdrawal) accept a ``requested_by`` only with an assertion that verifies with ``ERPILOT_ASSERTION_VERIFY_KEY``,
names that person and that session, and was valid at the moment it was used. The agent, which runs the model and
is the least trusted service, holds no signing key, so it can name no one but the person who asked.

Every refusal is an ``AssertionRefused`` whose ``reason`` names the rule (``assertion_missing``,
``assertion_invalid``, ``assertion_expired``, ``assertion_not_yet_valid``, ``assertion_session_mismatch``,
``assertion_subject_mismatch``); the services answer it as ``invalid_message`` with ``details.reason``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from erpilot_platform.refusals import InvalidMessage

ALGORITHM = "EdDSA"
# How long an assertion vouches for its person. A chat run keeps the assertion of the message that started it,
# so this is also how long a run may keep preparing writes and drafts after that message (ARCHITECTURE,
# "Requester assertions"); a run that outlives it gets ``assertion_expired`` on its next draft or write.
DEFAULT_TTL = timedelta(hours=1)
# Clocks of two hosts disagree a little; an assertion is still honoured this close to its edges.
LEEWAY = timedelta(seconds=30)
SIGNING_KEY_ENV = "ERPILOT_ASSERTION_SIGNING_KEY"
VERIFY_KEY_ENV = "ERPILOT_ASSERTION_VERIFY_KEY"
ASSERTION_KEYS_HINT = ("outside dev mode the gateway needs ERPILOT_ASSERTION_SIGNING_KEY and the ERP and the approval "
                       "service ERPILOT_ASSERTION_VERIFY_KEY; `erpilot keygen` prints new pairs")


class AssertionRefused(Exception):
    """The assertion does not vouch for this request; ``reason`` names the rule it broke."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Requester:
    """The person an assertion vouches for, in one session."""

    sub: str
    roles: tuple[str, ...]
    session_id: str
    issued_at: datetime
    expires_at: datetime


def sign_assertion(key: Ed25519PrivateKey, *, sub: str, roles: list[str] | tuple[str, ...], session_id: str,
                   now: datetime | None = None, ttl: timedelta = DEFAULT_TTL) -> str:
    """The gateway's assertion for ``sub`` (with ``roles``) acting in ``session_id``, valid ``ttl`` from ``now``."""
    issued = (now or datetime.now(UTC)).replace(microsecond=0)
    claims = {"sub": sub, "roles": list(roles), "session_id": session_id,
              "iat": int(issued.timestamp()), "exp": int((issued + ttl).timestamp())}
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def verify_assertion(token: str | None, key: Ed25519PublicKey, *, session_id: str, sub: str | None = None,
                     at: datetime | None = None, leeway: timedelta = LEEWAY) -> Requester:
    """The requester ``token`` vouches for, if it was signed by ``key``, names ``session_id`` (and ``sub`` when
    given) and was valid at ``at`` (default now: the moment the assertion is used, e.g. the ERP's prepare).

    Raises ``AssertionRefused`` otherwise.
    """
    if not token:
        raise AssertionRefused("assertion_missing", "the command carries no requester assertion")
    try:
        # The lifetime is checked below against ``at``, which need not be now (a relayed request is checked
        # against the moment the ledger accepted the assertion, not against when the relay got to it).
        claims = jwt.decode(token, key, algorithms=[ALGORITHM],
                            options={"require": ["sub", "session_id", "iat", "exp"], "verify_exp": False,
                                     "verify_iat": False, "verify_nbf": False})
        issued = datetime.fromtimestamp(int(claims["iat"]), UTC)
        expires = datetime.fromtimestamp(int(claims["exp"]), UTC)
        roles = claims.get("roles", [])
        if not isinstance(claims["sub"], str) or not isinstance(claims["session_id"], str) or not (
                isinstance(roles, list) and all(isinstance(role, str) for role in roles)):
            raise ValueError("malformed claims")
    except (jwt.InvalidTokenError, ValueError, TypeError, OverflowError) as exc:
        raise AssertionRefused("assertion_invalid", f"the requester assertion does not verify: {exc}") from None
    moment = at or datetime.now(UTC)
    if moment > expires + leeway:
        raise AssertionRefused("assertion_expired", f"the requester assertion expired at {expires.isoformat()}")
    if moment < issued - leeway:
        raise AssertionRefused("assertion_not_yet_valid",
                               f"the requester assertion is not valid before {issued.isoformat()}")
    if claims["session_id"] != session_id:
        raise AssertionRefused("assertion_session_mismatch", "the requester assertion is for another session")
    if sub is not None and claims["sub"] != sub:
        raise AssertionRefused("assertion_subject_mismatch", "the requester assertion names another person")
    return Requester(sub=claims["sub"], roles=tuple(roles), session_id=claims["session_id"], issued_at=issued,
                     expires_at=expires)


def require_vouched(token: str | None, key: Ed25519PublicKey, *, session_id: str, sub: str,
                    at: datetime | None = None) -> Requester:
    """``verify_assertion``, refused as every service answers a message whose requester nobody vouched for:
    ``InvalidMessage`` (``invalid_message``, dead-lettered, nothing stored) whose ``reason`` names the rule."""
    try:
        return verify_assertion(token, key, session_id=session_id, sub=sub, at=at)
    except AssertionRefused as refusal:
        raise InvalidMessage(refusal.reason, refusal.message) from None
