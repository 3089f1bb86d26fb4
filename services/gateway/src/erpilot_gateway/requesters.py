"""Requester assertions (SPEC §10, §11): the gateway vouches for the person behind one command it sends to the agent.

The agent runs the model and is the least trusted service: it forwards the assertion unchanged to the ERP and the
approval service, which accept a requester only with it. The person is the verified JWT's ``sub`` with its roles,
in the session the command is for, for the one tool call (``call_id``) or the one chat run (``run_id``, covering
the run's calls ``<run_id>:*``) the person asked for; only the gateway holds the signing key
(``ERPILOT_ASSERTION_SIGNING_KEY``). ``Services.vouch_call`` / ``vouch_run`` sign only after the session was found
to be the caller's.

Who owns a session is bound by the gateway itself, not taken from the agent: a session id the gateway makes
carries a MAC of its owner (``new_session_id``), so the owner check of such a session is done here, without the
agent, whose answer (or database) could name anyone (security review of #32: the standing-approval boundary is
the session). Session ids from before carry none and are still checked by asking the agent (``session_owner``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_gateway.auth import User
from erpilot_platform.assertions import DEFAULT_TTL, TOOL_CALL_TTL, sign_assertion

# ``ses_<20 hex random>_<32 hex MAC of random and owner>``: 57 characters, within the services' 64 for a session
# id and SPEC's ``^[A-Za-z0-9_-]{1,100}$``. A legacy id is ``ses_<20 hex>`` (or anything else the agent holds).
OWNER_BOUND = re.compile(r"ses_([0-9a-f]{20})_([0-9a-f]{32})")


def owner_bound(session_id: str) -> bool:
    """Whether ``session_id`` has the shape of an id the gateway bound to its owner (its MAC is checked with the
    owner, ``RequesterAssertions.session_owner``: an id of this shape whose MAC names nobody is nobody's)."""
    return OWNER_BOUND.fullmatch(session_id) is not None


def _session_key(signing_key: Ed25519PrivateKey) -> bytes:
    return hmac.new(signing_key.private_bytes_raw(), b"erpilot session owner v1", hashlib.sha256).digest()


def _session_mac(session_key: bytes, nonce: str, owner: str) -> str:
    return hmac.new(session_key, f"{nonce}\n{owner}".encode(), hashlib.sha256).hexdigest()[:32]


class RequesterAssertions:
    """Signs one assertion per command: ``sub`` and ``roles`` of the caller, ``session_id`` and the call or run of
    the command. A direct tool call's lives ``call_ttl`` (seconds: ``TOOL_CALL_TTL``), a run's ``run_ttl``."""

    def __init__(self, key: Ed25519PrivateKey, *, run_ttl: timedelta = DEFAULT_TTL,
                 call_ttl: timedelta = TOOL_CALL_TTL, previous: Ed25519PrivateKey | None = None):
        self.key = key
        self.run_ttl = run_ttl
        self.call_ttl = call_ttl
        # The session MAC key is derived from the assertion signing key: the one secret only the gateway holds
        # and every gateway instance shares, and what a session's owner check stands for anyway (an assertion is
        # signed after it), so no second secret to configure. A session id keeps the MAC it was made with, so after
        # a rotation the ids made under the old key are checked with ``previous``
        # (ERPILOT_ASSERTION_PREVIOUS_SIGNING_KEY), which signs nothing; without it their owner check fails and
        # they answer 404 (docs/OPERATIONS.md, Security, "Rotating the requester assertion key").
        self._session_key = _session_key(key)
        self._earlier_session_keys = (_session_key(previous),) if previous is not None else ()

    def for_call(self, user: User, session_id: str, call_id: str, tool: str, *, args: str | None = None,
                 now: datetime | None = None) -> str:
        """The assertion of one direct tool call (HTTP or MCP) of ``tool`` with the arguments whose fingerprint is
        ``args``."""
        now, ttl = self._lifetime(user, self.call_ttl, now)
        return sign_assertion(self.key, sub=user.sub, roles=user.roles, session_id=session_id, call_id=call_id,
                              tool=tool, args=args, now=now, ttl=ttl)

    def for_run(self, user: User, session_id: str, run_id: str, *, now: datetime | None = None) -> str:
        """The assertion of one chat run: its calls."""
        now, ttl = self._lifetime(user, self.run_ttl, now)
        return sign_assertion(self.key, sub=user.sub, roles=user.roles, session_id=session_id, run_id=run_id,
                              now=now, ttl=ttl)

    def for_cancel(self, user: User, session_id: str, run_id: str, *, now: datetime | None = None) -> str:
        """The assertion of the cancel of ``run_id`` (purpose ``cancel``): it withdraws that run's approvals and
        prepares nothing. The run id is the caller's word (the URL's), so it must not vouch for the run's calls.
        It lives as long as a direct call's: it only has to reach the approval service with the agent's
        ``evt.agent.run_cancelled``."""
        now, ttl = self._lifetime(user, self.call_ttl, now)
        return sign_assertion(self.key, sub=user.sub, roles=user.roles, session_id=session_id, run_id=run_id,
                              cancel=True, now=now, ttl=ttl)

    def new_session_id(self, owner: str) -> str:
        """A new session id that carries the MAC of its ``owner`` (the caller who creates it)."""
        nonce = secrets.token_hex(10)
        return f"ses_{nonce}_{self._session_mac(nonce, owner)}"

    def session_owner(self, session_id: str, sub: str) -> bool | None:
        """Whether ``sub`` owns ``session_id`` by the id's own MAC; None for a legacy id that carries none (then
        only the agent knows)."""
        bound = OWNER_BOUND.fullmatch(session_id)
        if bound is None:
            return None
        return any(hmac.compare_digest(bound.group(2), _session_mac(key, bound.group(1), sub))
                   for key in (self._session_key, *self._earlier_session_keys))

    def _session_mac(self, nonce: str, owner: str) -> str:
        return _session_mac(self._session_key, nonce, owner)

    def run_id(self, session_id: str, message_id: str) -> str:
        """The run a message starts, fixed by the gateway before it signs (the run's assertion names it): the same
        session and message id give the same run, so a retry keeps ``post_message``'s idempotency. Derived with
        the signing key (Ed25519 signatures are deterministic), so nobody else can predict a run's id, and with it
        the call ids ``<run_id>:*`` the agent gives the model's calls, and claim one first. Its second half binds
        its first to the session (``issued_run``), so the gateway knows its own runs without asking the agent."""
        tag = self.key.sign(f"erpilot run id\x00{session_id}\x00{message_id}".encode())
        nonce = hashlib.sha256(tag).hexdigest()[:16]
        return f"run_{nonce}{self._run_tag(session_id, nonce)}"

    def issued_run(self, session_id: str, run_id: str) -> bool:
        """Whether this gateway's key made ``run_id`` for a message of ``session_id`` (``run_id``): false for an id
        made up by anyone else, for another session's run, and for a run id of an earlier version (their whole 32
        digits were one hash; their assertions lived an hour at most)."""
        digits = run_id.removeprefix("run_")
        if len(digits) != 32 or not run_id.startswith("run_"):
            return False
        return hmac.compare_digest(self._run_tag(session_id, digits[:16]), digits[16:])

    def _run_tag(self, session_id: str, nonce: str) -> str:
        tag = self.key.sign(f"erpilot run of\x00{session_id}\x00{nonce}".encode())
        return hashlib.sha256(tag).hexdigest()[:16]

    @staticmethod
    def _lifetime(user: User, ttl: timedelta, now: datetime | None) -> tuple[datetime, timedelta]:
        """Never past the token's own ``exp``: the gateway vouches for no longer than the identity provider did
        (a run started with a token about to expire cannot act in that name for an hour)."""
        now = (now or datetime.now(UTC)).replace(microsecond=0)
        if user.expires_at is not None:
            ttl = min(ttl, datetime.fromtimestamp(int(user.expires_at), UTC) - now)
        return now, ttl
