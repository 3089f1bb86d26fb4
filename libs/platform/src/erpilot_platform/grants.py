"""Ed25519 grant signing (SPEC §3.3, §7): the approval service signs, the ERP verifies.

The same key signs the approval service's re-prepare of an edited version (``cmd.erp.prepare`` with
``supersedes``, ``edit_signature``): the agent may publish that subject too, so the ERP accepts ``supersedes`` only
with the approval service's signature (issue #32). A grant's signed bytes are never a prepare's (each is the RFC 8785
JSON of its own message's fields), so neither signature can pass for the other.

Keys are raw 32-byte Ed25519 keys in base64, in ``ERPILOT_GRANT_SIGNING_KEY`` /
``ERPILOT_GRANT_VERIFY_KEY`` or, in dev mode when those are unset, in the data dir's development key files, a
file per service (``erpilot_platform.dev_keys``).
"""

from __future__ import annotations

import base64
import binascii

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_platform.signed_messages import signature, signature_verifies, signed_payload

GRANT_KEYS_HINT = ("outside dev mode the approval service needs ERPILOT_GRANT_SIGNING_KEY and the ERP "
                   "ERPILOT_GRANT_VERIFY_KEY; `erpilot keygen` prints new pairs")


def grant_payload(grant: GrantV1) -> bytes:
    """The signed bytes: RFC 8785 JSON of every field but ``signature``, datetimes as UTC ISO-8601.

    Unset optional fields are left out, so a field added to GrantV1 later does not change (and so
    does not invalidate) the signature of a grant that does not use it (``signed_messages``).
    """
    return signed_payload(grant, signature_field="signature")


def sign_grant(grant: GrantV1, private_key: Ed25519PrivateKey) -> GrantV1:
    """A copy of the grant with its base64 Ed25519 ``signature``."""
    return grant.model_copy(update={"signature": signature(grant, private_key, signature_field="signature")})


def verify_grant(grant: GrantV1, public_key: Ed25519PublicKey) -> bool:
    """True only when the signature is valid base64 and signs exactly these fields with this key."""
    return signature_verifies(grant, public_key, signature_field="signature")


def sign_edit(cmd: PrepareOperationV1, private_key: Ed25519PrivateKey) -> PrepareOperationV1:
    """A copy of the approval service's re-prepare of an edited version with its ``edit_signature``."""
    return cmd.model_copy(update={"edit_signature": signature(cmd, private_key, signature_field="edit_signature")})


def verify_edit(cmd: PrepareOperationV1, public_key: Ed25519PublicKey) -> bool:
    """True only when ``edit_signature`` signs exactly this prepare's other fields with the approval service's key."""
    return signature_verifies(cmd, public_key, signature_field="edit_signature")


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
    (``ERPILOT_GRANT``, ``ERPILOT_ASSERTION`` or ``ERPILOT_LEDGER``; ``erpilot keygen``, test stacks)."""
    private_key = Ed25519PrivateKey.generate()
    return {f"{prefix}_SIGNING_KEY": encode_signing_key(private_key),
            f"{prefix}_VERIFY_KEY": encode_public_key(private_key.public_key())}
