"""Ed25519 signatures over a message's own fields: what grants (``grants``) and the ledger's approval requests
(``ledger_signatures``) are signed and verified with.

The signed bytes are the RFC 8785 JSON of every field but the signature, so the signature survives the wire: the
receiver parses the message into the same model and computes the same bytes. Two rules make that hold whatever
the sender wrote: a top-level datetime is signed as its UTC ISO-8601 instant (one instant, one string, whatever
offset it travelled with; a naive one is refused), and an unset optional field (None) is left out, so a field
added to a message later does not change the signature of a message that does not use it. Nested values (tool
arguments, a preview) are signed as their JSON; a preview parsed off the wire as the JSON received (``as_received``),
so a field a newer ledger added to it, or one this receiver's contract added and the ledger did not write, does
not break the signature.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel


def signed_payload(message: BaseModel, *, signature_field: str) -> bytes:
    """The bytes a signature of ``message`` covers (module docstring); ValueError for a naive datetime or a value
    RFC 8785 cannot represent."""
    # Only top-level None fields are left out: a nested value (a preview) is signed as its whole JSON, None values
    # included, as it travels (``exclude_none`` would reach into nested models).
    dumped = message.model_dump(mode="json", exclude={signature_field})
    fields = {name: value for name, value in dumped.items() if getattr(message, name, None) is not None}
    for name in fields:
        value = getattr(message, name)
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"{type(message).__name__}.{name} must be timezone-aware")
            fields[name] = value.astimezone(UTC).isoformat()
        elif callable(as_received := getattr(value, "as_received", None)):
            # A nested value signed as the JSON it was received as (``PreviewV1.as_received``): what a newer
            # sender wrote into it that this receiver's model does not know, or did not write and this model would
            # default, stays as signed. Found by its method: an isinstance on a runtime-checkable Protocol cost
            # more than the rest of the check.
            fields[name] = as_received()
    return rfc8785.dumps(fields)


def signature(message: BaseModel, private_key: Ed25519PrivateKey, *, signature_field: str) -> str:
    """Base64 of the Ed25519 signature of ``message``'s signed payload."""
    signed = private_key.sign(signed_payload(message, signature_field=signature_field))
    return base64.b64encode(signed).decode("ascii")


def signature_verifies(message: BaseModel, public_key: Ed25519PublicKey, *, signature_field: str) -> bool:
    """True only when ``message``'s signature field is valid base64 and signs exactly its other fields with this
    key; False for a missing or empty one."""
    encoded = getattr(message, signature_field)
    if not encoded:
        return False
    try:
        signed = base64.b64decode(encoded, validate=True)
        public_key.verify(signed, signed_payload(message, signature_field=signature_field))
    except (binascii.Error, ValueError, TypeError, InvalidSignature):
        return False
    return True
