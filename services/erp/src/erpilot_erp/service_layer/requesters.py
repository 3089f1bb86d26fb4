"""Who asked (SPEC §10, §11): the ERP accepts a ``requested_by`` only with the gateway's requester assertion for
that person in that session, for that tool call (or the chat run it belongs to), valid when the command came
(``erpilot_platform.assertions``). The agent forwards the assertion it was given; it holds no key to make one, so it
can name no one but the person who asked, and only for the call they asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from erpilot_platform.assertions import TOOL_CALL, require_vouched
from erpilot_platform.refusals import InvalidMessage

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Requesters:
    """Checks requester assertions with ``ERPILOT_ASSERTION_VERIFY_KEY``."""

    def __init__(self, verify_key: Ed25519PublicKey):
        self.verify_key = verify_key

    def vouch(self, assertion: str | None, *, session_id: str, call_id: str, tool: str, requested_by: str,
              at: datetime, args: str | None = None) -> None:
        """Nothing when ``assertion`` vouches for ``requested_by`` in ``session_id`` for ``call_id`` of ``tool`` at
        ``at``;
        otherwise ``InvalidMessage`` whose reason names the rule (``assertion_missing``, ``assertion_expired``,
        ``assertion_call_mismatch``, ...)."""
        requester = require_vouched(assertion, self.verify_key, session_id=session_id, sub=requested_by,
                                    call_id=call_id, tool=tool, at=at)
        # A direct call's assertion names its arguments (the fingerprint of the normalised ones the gateway was
        # given, ``args``); a draft or a prepare (``args``: the fingerprint of its own) with other arguments is not
        # what the person asked for. A run's names none: the model picks them. One signed before the claim existed
        # has none either; the gateway signs every direct call's with it now.
        if (args is not None and requester.purpose == TOOL_CALL and requester.args is not None
                and requester.args != args):
            raise InvalidMessage("assertion_args_mismatch",
                                 f"the requester assertion is for call {call_id} with other arguments")
