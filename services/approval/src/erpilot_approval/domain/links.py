"""One-time signed decision links of approval emails (SPEC §11 "Approval channels"; no I/O).

A link names one approval, one person, one action and the fingerprint that person was mailed, and is valid until
the approval's deadline. It is signed with an HMAC key derived from the approval service's grant signing key, so
only the approval service mints and checks links: the gateway only carries the token from the mail to the
approval service, and the agent never sees one (mails go from this service straight to the person).

"Usable once" needs no ledger of tokens: a link decides by recording its person's vote, and a link whose person
has voted on that approval is used (``link_state``); the vote is written under the approval's row lock.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.people import Contact
from erpilot_approval.domain.votes import vote_of

ACTIONS = ("approve", "reject")
_LABEL = b"erpilot approval email links v1"
_MAX_TOKEN = 2000


class LinkError(Exception):
    """A link that decides nothing: ``code`` (``invalid_link``, ``link_used``, ``superseded``, ``already_decided``,
    ``expired``) and the HTTP-like ``status`` its page is answered with."""

    def __init__(self, code: str, status: int, message: str):
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


@dataclass(frozen=True)
class Link:
    pending_id: str
    sub: str
    action: str
    fingerprint: str
    expires_at: datetime


def link_key(grant_key: Ed25519PrivateKey) -> bytes:
    """The links' HMAC key: derived from the grant key (a label of its own), so it lives where that key lives."""
    raw = grant_key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                  serialization.NoEncryption())
    return hmac.new(raw, _LABEL, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint(key: bytes, link: Link) -> str:
    """``<payload>.<mac>``, both base64url: the payload is the link's fields as JSON."""
    payload = _b64(json.dumps({"p": link.pending_id, "s": link.sub, "a": link.action, "f": link.fingerprint,
                               "e": int(link.expires_at.timestamp())}, separators=(",", ":")).encode())
    return payload + "." + _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())


def verify(key: bytes, token: str, pending_id: str) -> Link:
    """The link ``token`` stands for, when this service signed it for ``pending_id``; else ``invalid_link`` (403)."""
    bad = LinkError("invalid_link", 403, "this link is not valid (it was altered, or belongs to another approval)")
    if not isinstance(token, str) or len(token) > _MAX_TOKEN or token.count(".") != 1:
        raise bad
    payload, mac = token.split(".")
    try:
        signature = _unb64(mac)
    except ValueError:
        raise bad from None
    if not hmac.compare_digest(signature, hmac.new(key, payload.encode(), hashlib.sha256).digest()):
        raise bad
    fields = json.loads(_unb64(payload))  # ours: signed above
    if fields["p"] != pending_id or fields["a"] not in ACTIONS:
        raise bad
    return Link(pending_id=fields["p"], sub=fields["s"], action=fields["a"], fingerprint=fields["f"],
                expires_at=datetime.fromtimestamp(fields["e"], UTC))


def link_state(link: Link, approval: PendingApproval, now: datetime) -> None:
    """Raise why ``link`` can no longer decide ``approval`` now (used, superseded, decided, expired); the checks a
    decision makes after this (role, separation of duties, quorum) are the decision's own."""
    if vote_of(approval.votes, link.sub) is not None:
        raise LinkError("link_used", 409, "this link was already used: your decision is recorded")
    if approval.status == "superseded" or link.fingerprint != approval.fingerprint:
        raise LinkError("superseded", 409, "this approval was replaced by a newer version: use the newer email")
    if approval.status != "pending":
        raise LinkError("already_decided", 409, f"this approval is already {approval.status}")
    if now >= min(link.expires_at, approval.expires_at):
        raise LinkError("expired", 410, "this link has expired: the approval's deadline has passed")


def recipients(approval: PendingApproval, roles_of: Mapping[str, Sequence[str]] | None,
               contacts: Mapping[str, Contact]) -> list[tuple[str, str]]:
    """``(sub, email)`` of each person with an address who holds a role that may decide ``approval`` now and is
    neither its requester nor an editor of it (separation of duties: they could not approve it)."""
    if roles_of is None:
        return []
    wanted = set(approval.required_roles)
    return sorted((sub, contact.email) for sub, contact in contacts.items()
                  if contact.email and sub not in approval.parties and wanted & set(roles_of.get(sub, ())))
