"""Ed25519 grant signing (SPEC §3.3, §7): the approval service signs, the ERP verifies.

Keys are raw 32-byte Ed25519 keys in base64, in ``ERPILOT_GRANT_SIGNING_KEY`` /
``ERPILOT_GRANT_VERIFY_KEY`` or, when those are unset, in one key pair under the data dir.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from erpilot_contracts.approval.v1 import GrantV1

PRIVATE_KEY_FILE = "grant_ed25519.key"
PUBLIC_KEY_FILE = "grant_ed25519.pub"
GRANT_KEYS_HINT = ("outside dev mode the approval service needs ERPILOT_GRANT_SIGNING_KEY and the ERP "
                   "ERPILOT_GRANT_VERIFY_KEY; `erpilot keygen` prints a new pair")


def grant_payload(grant: GrantV1) -> bytes:
    """The signed bytes: RFC 8785 JSON of every field but ``signature``, datetimes as UTC ISO-8601.

    Unset optional fields are left out, so a field added to GrantV1 later does not change (and so
    does not invalidate) the signature of a grant that does not use it.
    """
    fields = grant.model_dump(mode="python", exclude={"signature"}, exclude_none=True)
    for name, value in fields.items():
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"grant.{name} must be timezone-aware")
            # One instant, one string, whatever offset the grant travelled with.
            fields[name] = value.astimezone(UTC).isoformat()
    return rfc8785.dumps(fields)


def sign_grant(grant: GrantV1, private_key: Ed25519PrivateKey) -> GrantV1:
    """A copy of the grant with its base64 Ed25519 ``signature``."""
    signature = private_key.sign(grant_payload(grant))
    return grant.model_copy(update={"signature": base64.b64encode(signature).decode("ascii")})


def verify_grant(grant: GrantV1, public_key: Ed25519PublicKey) -> bool:
    """True only when the signature is valid base64 and signs exactly these fields with this key."""
    try:
        signature = base64.b64decode(grant.signature, validate=True)
        public_key.verify(signature, grant_payload(grant))
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True


def load_signing_key(b64: str, *, kind: str = "grant signing") -> Ed25519PrivateKey:
    """The private key from base64 of its raw 32 bytes."""
    return Ed25519PrivateKey.from_private_bytes(_decode_raw_key(b64, kind))


def load_verify_key(b64: str, *, kind: str = "grant verify") -> Ed25519PublicKey:
    """The public key from base64 of its raw 32 bytes."""
    return Ed25519PublicKey.from_public_bytes(_decode_raw_key(b64, kind))


def encode_signing_key(private_key: Ed25519PrivateKey) -> str:
    """Base64 of the raw 32-byte private key (the ``ERPILOT_GRANT_SIGNING_KEY`` format)."""
    return base64.b64encode(private_key.private_bytes_raw()).decode("ascii")


def encode_public_key(public_key: Ed25519PublicKey) -> str:
    """Base64 of the raw 32-byte public key (the ``ERPILOT_GRANT_VERIFY_KEY`` format)."""
    return base64.b64encode(public_key.public_bytes_raw()).decode("ascii")


def ensure_keypair(data_dir: Path, *, stem: str = "grant") -> tuple[Ed25519PrivateKey, Ed25519PublicKey]:
    """Read the data dir's key pair ``<stem>_ed25519.key|pub`` (``grant``, or ``assertion`` for requester
    assertions), creating it first if absent; concurrent callers get the same pair.

    Each file is written whole to a temporary name and then hard-linked to its final name, which
    fails if the name exists: the first process wins and every other one reads the winner's file,
    never a half-written one.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    private_path, public_path = data_dir / f"{stem}_ed25519.key", data_dir / f"{stem}_ed25519.pub"
    if not private_path.exists():
        if public_path.exists():
            raise ValueError(f"{public_path} exists without {private_path}: restore the key or remove both")
        _create_exclusive(private_path, encode_signing_key(Ed25519PrivateKey.generate()), mode=0o600)
    try:
        private_key = load_signing_key(private_path.read_text(encoding="ascii"))
    except ValueError as exc:
        raise ValueError(f"{private_path}: {exc}") from None
    public_key = private_key.public_key()
    encoded_public = encode_public_key(public_key)
    if not public_path.exists():
        _create_exclusive(public_path, encoded_public, mode=0o644)
    if public_path.read_text(encoding="ascii").strip() != encoded_public:
        raise ValueError(f"{public_path} does not match {private_path}")
    return private_key, public_key


def _create_exclusive(path: Path, text: str, mode: int) -> None:
    """Create ``path`` with ``text`` unless it already exists; readers never see a partial file."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed it; make it exactly `mode`
        os.write(fd, (text + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temp, path)
    except FileExistsError:
        pass  # another process created it first; theirs is the one everybody uses
    finally:
        temp.unlink()
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the new name durable across a power loss; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _decode_raw_key(b64: str, kind: str) -> bytes:
    try:
        raw = base64.b64decode(b64.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"the {kind} key is not valid base64") from None
    if len(raw) != 32:
        raise ValueError(f"the {kind} key must be 32 raw bytes, got {len(raw)}")
    return raw


def new_keypair_env(prefix: str = "ERPILOT_GRANT") -> dict[str, str]:
    """A fresh key pair as the two environment variables ``<prefix>_SIGNING_KEY`` and ``<prefix>_VERIFY_KEY``
    (``ERPILOT_GRANT`` or ``ERPILOT_ASSERTION``; ``erpilot keygen``, test stacks)."""
    private_key = Ed25519PrivateKey.generate()
    return {f"{prefix}_SIGNING_KEY": encode_signing_key(private_key),
            f"{prefix}_VERIFY_KEY": encode_public_key(private_key.public_key())}
