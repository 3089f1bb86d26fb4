"""The tamper-evident audit log: a hash chain of events, each row signed, with signed checkpoints. No I/O.

Shared by who writes the chain (the approval service, ``erpilot_approval.domain.audit``) and who checks it
(``erpilot audit verify``, which reads the rows through ``query.approval.audit_chain`` and verifies them here with
the public key alone, trusting neither the service nor its database).

``hash = sha256(prev_hash ‖ JCS(event))`` (RFC 8785 canonical JSON; ``prev_hash`` as its 32 raw bytes, 32 zero
bytes before the first row), where the event holds its own ``seq`` (gap-free from 1), so a row cannot be moved.
Each row's hash is also signed with the approval service's Ed25519 key, and a checkpoint signs the head
``(seq, hash)`` now and then: someone who can write the database but does not hold the key can neither change,
insert nor delete a row, nor rewrite the chain from some row on, without ``verify`` naming the first row that
does not check (a row deleted at the tail after the last checkpoint is the one thing it cannot see).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

GENESIS = "0" * 64
# What is recorded: every change an approval goes through, and what the ledger reports of its grant.
KINDS = ("request", "vote", "decision", "grant_issued", "edit", "expiry", "withdrawal", "grant_consumed",
         "escalation", "delegation_given", "delegation_revoked",
         "commit_outcome")


@dataclass(frozen=True)
class AuditRow:
    seq: int
    at: datetime
    kind: str
    pending_id: str | None
    operation_id: str | None
    actor: str | None
    data: dict[str, Any]
    prev_hash: str
    hash: str
    signature: str

    def event(self) -> dict[str, Any]:
        """The hashed event: everything but the chain fields themselves."""
        return event_of(self.seq, self.at, self.kind, self.pending_id, self.operation_id, self.actor, self.data)

    def to_wire(self) -> dict[str, Any]:
        """One JSON line of ``erpilot audit export`` / an item of ``GET /v1/audit``."""
        return {**self.event(), "prev_hash": self.prev_hash, "hash": self.hash, "signature": self.signature}


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: str
    signed_at: datetime
    signature: str


@dataclass(frozen=True)
class Broken:
    """The first link that does not check: the row (``seq``) and why."""

    seq: int
    reason: str


def event_of(seq: int, at: datetime, kind: str, pending_id: str | None, operation_id: str | None,
             actor: str | None, data: dict[str, Any]) -> dict[str, Any]:
    return {"seq": seq, "at": at.astimezone(UTC).isoformat(), "kind": kind, "pending_id": pending_id,
            "operation_id": operation_id, "actor": actor, "data": data}


def chain_hash(prev_hash: str, event: dict[str, Any]) -> str:
    return hashlib.sha256(bytes.fromhex(prev_hash) + rfc8785.dumps(event)).hexdigest()


def sign(key: Ed25519PrivateKey, digest: str) -> str:
    return base64.b64encode(key.sign(bytes.fromhex(digest))).decode("ascii")


def checkpoint_payload(seq: int, digest: str) -> bytes:
    return rfc8785.dumps({"checkpoint": {"seq": seq, "hash": digest}})


def sign_checkpoint(key: Ed25519PrivateKey, seq: int, digest: str) -> str:
    return base64.b64encode(key.sign(checkpoint_payload(seq, digest))).decode("ascii")


def _valid(key: Ed25519PublicKey, signature: str, payload: bytes) -> bool:
    try:
        key.verify(base64.b64decode(signature, validate=True), payload)
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True


def verify(rows: Iterable[AuditRow], key: Ed25519PublicKey, checkpoints: Iterable[Checkpoint] = (), *,
           start: Checkpoint | None = None) -> tuple[Broken | None, int]:
    """Walk the chain in ``seq`` order (from the start, or after the ``start`` checkpoint) and return the first
    broken link (or None) and how many rows were checked.

    A row is broken when its ``seq`` is not the next one (a row before it was deleted, or it was inserted),
    its ``prev_hash`` is not its predecessor's hash, its hash is not that of its own content, or its
    signature is not the service's; a checkpoint is broken when its signature is not valid or the row it
    names does not have its hash (or is missing).
    """
    marks = {c.seq: c for c in checkpoints}
    for mark in marks.values():
        if not _valid(key, mark.signature, checkpoint_payload(mark.seq, mark.hash)):
            return Broken(mark.seq, f"checkpoint at {mark.seq} has no valid signature"), 0
    if start is not None and not _valid(key, start.signature, checkpoint_payload(start.seq, start.hash)):
        return Broken(start.seq, "the starting checkpoint has no valid signature"), 0
    expected_seq, prev = (start.seq + 1, start.hash) if start else (1, GENESIS)
    checked = 0
    for row in rows:
        if row.seq < expected_seq:
            continue
        if row.seq != expected_seq:
            return Broken(expected_seq, f"row {expected_seq} is missing (next is {row.seq})"), checked
        if row.prev_hash != prev:
            return Broken(row.seq, "prev_hash is not the hash of the row before"), checked
        if chain_hash(row.prev_hash, row.event()) != row.hash:
            return Broken(row.seq, "its hash does not match its content"), checked
        if not _valid(key, row.signature, bytes.fromhex(row.hash)):
            return Broken(row.seq, "its signature is not the approval service's"), checked
        mark = marks.get(row.seq)
        if mark is not None and mark.hash != row.hash:
            return Broken(row.seq, f"checkpoint {row.seq} signed another hash"), checked
        prev, expected_seq, checked = row.hash, expected_seq + 1, checked + 1
    beyond = [seq for seq in marks if seq >= expected_seq]
    if beyond:
        missing = min(beyond)
        return Broken(missing, f"checkpoint {missing} names a row that is not there (rows were deleted)"), checked
    return None, checked
