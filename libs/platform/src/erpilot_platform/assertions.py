"""Requester assertions (SPEC §10): the gateway vouches for the person behind a command it sends to the agent.

An assertion is a compact JWS (PyJWT, ``EdDSA``: Ed25519) with the claims ``sub``, ``roles``, ``session_id``,
``purpose``, ``call_id`` or ``run_id``, ``iat`` and ``exp`` (SPEC §11). It vouches for one command, not for a person
in a session: ``purpose = "tool_call"`` with the ``call_id`` and the ``tool`` of one tool call (the tool too: the
ERP records no read, so a read's call id alone could be taken again for a write; and ``args``, the fingerprint of
its normalised arguments, which the ERP compares with a draft's or a prepare's), or ``purpose = "run"`` with the
``run_id`` of one chat run, which covers the run's calls (``<run_id>:*``, whatever tool the model picks), or
``purpose = "cancel"`` with the ``run_id`` of the run a person cancels, which covers that run's withdrawal and no
call (SPEC §11 names ``tool_call`` and ``run``; ``cancel`` is our refinement: the run id of a cancel is the
caller's word from the URL, so its assertion must not be a write credential for that run's calls). The gateway
signs it with
``ERPILOT_ASSERTION_SIGNING_KEY`` after it checked the session is the caller's; the agent stores it and forwards it
unchanged; the ERP (read, draft, prepare) and the approval service (request, withdrawal) accept a ``requested_by``
only with an assertion that verifies with ``ERPILOT_ASSERTION_VERIFY_KEY``, names that person and that session,
covers that call (or run), and was valid at the moment it was used. The agent, which runs the model and is the
least trusted service, holds no signing key, so it can name no one but the person who asked, and only for what
that person asked for: the assertion of a read cannot carry a write (issue #32).

Every refusal is an ``AssertionRefused`` whose ``reason`` names the rule (``assertion_missing``,
``assertion_invalid``, ``assertion_expired``, ``assertion_not_yet_valid``, ``assertion_session_mismatch``,
``assertion_subject_mismatch``, ``assertion_call_mismatch``); the services answer it as ``invalid_message`` with
``details.reason``.
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
# How long the assertion of one direct tool call (HTTP or MCP) vouches for it. The agent sends the call's read,
# draft or prepare while it handles the gateway's command, within the gateway's request timeout (seconds); the
# ERP checks a draft or a prepare at the time JetStream stored the command, so a redelivery after a crash (ack
# waits of 2 s in tests, 30 s deployed) still verifies. A minute covers that with room and leaves a stolen
# assertion, already bound to its one call, next to no time.
TOOL_CALL_TTL = timedelta(seconds=60)
TOOL_CALL = "tool_call"
RUN = "run"
CANCEL = "cancel"
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
    purpose: str = TOOL_CALL
    call_id: str | None = None
    run_id: str | None = None
    tool: str | None = None
    # A direct call's: the fingerprint of the call's normalised arguments (``erpilot_contracts.fingerprint``), which
    # the ERP compares with the draft's or the prepare's; None for a run's, a cancel's, or one signed before.
    args: str | None = None


def sign_assertion(key: Ed25519PrivateKey, *, sub: str, roles: list[str] | tuple[str, ...], session_id: str,
                   call_id: str | None = None, tool: str | None = None, run_id: str | None = None,
                   cancel: bool = False, args: str | None = None, now: datetime | None = None,
                   ttl: timedelta = DEFAULT_TTL) -> str:
    """The gateway's assertion for ``sub`` (with ``roles``) acting in ``session_id`` for exactly one tool call
    (``call_id`` of ``tool``), one chat run (``run_id``) or the cancel of one (``run_id`` and ``cancel``), valid
    ``ttl`` from ``now``."""
    if (call_id is None) == (run_id is None) or (call_id is None) != (tool is None) or (cancel and run_id is None):
        raise ValueError("an assertion vouches for one tool call (call_id and tool) or one run (run_id)")
    issued = (now or datetime.now(UTC)).replace(microsecond=0)
    bound = ({"purpose": TOOL_CALL, "call_id": call_id, "tool": tool, **({"args": args} if args else {})}
             if call_id is not None else {"purpose": CANCEL if cancel else RUN, "run_id": run_id})
    claims = {"sub": sub, "roles": list(roles), "session_id": session_id, **bound,
              "iat": int(issued.timestamp()), "exp": int((issued + ttl).timestamp())}
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def covers(requester: Requester, *, call_id: str | None = None, tool: str | None = None,
           run_id: str | None = None) -> bool:
    """Whether the assertion vouches for the call ``call_id`` of ``tool`` (its own call and tool, or any call of
    its run) or for the withdrawal of the run ``run_id`` (only a cancel's assertion for that run: neither a tool
    call's nor a run's, which the agent holds for as long as the run goes on). A cancel's covers no call."""
    if run_id is not None:
        return requester.purpose == CANCEL and requester.run_id == run_id
    if requester.purpose == TOOL_CALL:
        return (requester.call_id, requester.tool) == (call_id, tool)
    return requester.purpose == RUN and call_id is not None and call_id.startswith(f"{requester.run_id}:")


def verify_assertion(token: str | None, key: Ed25519PublicKey, *, session_id: str, sub: str | None = None,
                     call_id: str | None = None, tool: str | None = None, run_id: str | None = None,
                     at: datetime | None = None, leeway: timedelta = LEEWAY) -> Requester:
    """The requester ``token`` vouches for, if it was signed by ``key``, names ``session_id`` (and ``sub`` when
    given), covers the command's ``call_id`` and ``tool`` (or, for a cancel, ``run_id``) and was valid at ``at``
    (default now: the moment the assertion is used, e.g. the ERP's prepare).

    Raises ``AssertionRefused`` otherwise.
    """
    if (call_id is None) == (run_id is None) or (call_id is None) != (tool is None):
        raise ValueError("verify an assertion against the command's call_id and tool, or its run_id")
    if not token:
        raise AssertionRefused("assertion_missing", "the command carries no requester assertion")
    try:
        # The lifetime is checked below against ``at``, which need not be now (a relayed request is checked
        # against the moment the ledger accepted the assertion, not against when the relay got to it).
        claims = jwt.decode(token, key, algorithms=[ALGORITHM],
                            options={"require": ["sub", "session_id", "purpose", "iat", "exp"],
                                     "verify_exp": False, "verify_iat": False, "verify_nbf": False})
        issued = datetime.fromtimestamp(int(claims["iat"]), UTC)
        expires = datetime.fromtimestamp(int(claims["exp"]), UTC)
        roles = claims.get("roles", [])
        bound_to = {TOOL_CALL: "call_id", RUN: "run_id", CANCEL: "run_id"}.get(claims["purpose"])
        if not isinstance(claims["sub"], str) or not isinstance(claims["session_id"], str) or not (
                isinstance(roles, list) and all(isinstance(role, str) for role in roles)):
            raise ValueError("malformed claims")
        if bound_to is None or not isinstance(claims.get(bound_to), str) or not claims[bound_to] or (
                claims["purpose"] == TOOL_CALL and not isinstance(claims.get("tool"), str)):
            raise ValueError("the assertion is bound to no tool call and no run")
        if "args" in claims and not isinstance(claims["args"], str):
            raise ValueError("malformed args claim")
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
    requester = Requester(sub=claims["sub"], roles=tuple(roles), session_id=claims["session_id"], issued_at=issued,
                          expires_at=expires, purpose=claims["purpose"], call_id=claims.get("call_id"),
                          run_id=claims.get("run_id"), tool=claims.get("tool"),
                          args=claims.get("args"))
    if not covers(requester, call_id=call_id, tool=tool, run_id=run_id):
        what = f"call {call_id} of {tool}" if call_id is not None else f"run {run_id}"
        raise AssertionRefused("assertion_call_mismatch", f"the requester assertion does not cover {what}")
    return requester


def require_vouched(token: str | None, key: Ed25519PublicKey, *, session_id: str, sub: str,
                    call_id: str | None = None, tool: str | None = None, run_id: str | None = None,
                    at: datetime | None = None) -> Requester:
    """``verify_assertion``, refused as every service answers a message whose requester nobody vouched for:
    ``InvalidMessage`` (``invalid_message``, dead-lettered, nothing stored) whose ``reason`` names the rule."""
    try:
        return verify_assertion(token, key, session_id=session_id, sub=sub, call_id=call_id, tool=tool,
                                run_id=run_id, at=at)
    except AssertionRefused as refusal:
        raise InvalidMessage(refusal.reason, refusal.message) from None
