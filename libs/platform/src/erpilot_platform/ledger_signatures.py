"""The ledger's signature on its approval requests (SPEC §10): the ERP signs, the approval service verifies.

The ERP builds ``cmd.approval.request`` from its own record of a prepared operation (preview, amount, requester)
and puts it in its outbox. Who may publish that subject is otherwise a matter of NATS permissions, which a
development stack (`erpilot up`: no NATS credentials on loopback) does not have: there a compromised agent could
send its own request, with a real operation id and fingerprint, a requester assertion it holds and an invented
preview, before the ERP's, and the ledger's request would then be taken for a repeat of it. So the ERP signs
every request with a key only it holds (``ERPILOT_LEDGER_SIGNING_KEY``), and the approval service, holding the
public half (``ERPILOT_LEDGER_VERIFY_KEY``), acts on no request whose signature does not verify: nothing the
agent sends decides what a person is shown.

The signature covers every field but ``ledger_signature`` (``signed_messages``): RFC 8785 JSON, unset fields left
out, datetimes as UTC instants. Keys are raw 32-byte Ed25519 keys in base64, as the grant keys; in dev mode, when
unset, the development key files (``erpilot_platform.dev_keys``: ``keys/erp/ledger_ed25519.key``,
``keys/approval/ledger_ed25519.pub``).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_platform.signed_messages import signature, signature_verifies, signed_payload

SIGNING_KEY_ENV = "ERPILOT_LEDGER_SIGNING_KEY"
VERIFY_KEY_ENV = "ERPILOT_LEDGER_VERIFY_KEY"
LEDGER_KEYS_HINT = (f"outside dev mode the ERP needs {SIGNING_KEY_ENV} and the approval service {VERIFY_KEY_ENV}; "
                    "`erpilot keygen` prints new pairs")
SIGNATURE_FIELD = "ledger_signature"


def request_payload(request: RequestApprovalV1) -> bytes:
    """The signed bytes of a request: RFC 8785 JSON of every field but ``ledger_signature``."""
    return signed_payload(request, signature_field=SIGNATURE_FIELD)


def sign_request(request: RequestApprovalV1, private_key: Ed25519PrivateKey) -> RequestApprovalV1:
    """A copy of the request with the ledger's ``ledger_signature``."""
    return request.model_copy(update={SIGNATURE_FIELD: signature(request, private_key,
                                                                 signature_field=SIGNATURE_FIELD)})


def verify_request(request: RequestApprovalV1, public_key: Ed25519PublicKey) -> bool:
    """True only when ``ledger_signature`` is valid base64 and signs exactly this request's other fields with
    this key (False for a request without one)."""
    return signature_verifies(request, public_key, signature_field=SIGNATURE_FIELD)
