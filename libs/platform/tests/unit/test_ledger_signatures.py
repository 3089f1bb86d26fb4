"""The ledger's signature on its approval requests: round trip through the wire, every field covered, wrong keys and
missing or malformed signatures refused (the approval service's use of it: services/approval tests)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_platform.ledger_signatures import request_payload, sign_request, verify_request

pytestmark = pytest.mark.unit

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
AT = datetime(2026, 10, 19, 12, 0, 0, 123456, tzinfo=UTC)
ARGUMENTS = {"draft_id": "D-1", "revision": 2}
REQUEST = RequestApprovalV1(
    call_id="call-1", session_id="ses-1", tool="submit_order", tool_schema_version=1, arguments=ARGUMENTS,
    fingerprint="sha256:" + "ab" * 32, operation_id="op-1",
    preview={"operation": "Submit order", "object": "Draft D-1 revision 2", "target": "Nordwind",
             "amount_minor": 1_250_000, "currency": "EUR", "effects": [{"kind": "stock", "before": 12, "after": 5}],
             "notes": [], "details": {"lines": [{"sku": "SKU-A", "qty": 7, "unit_price_minor": 178_571.5}]}},
    requested_by="alice", assertion="header.claims.signature", asserted_at=AT, prepared_at=AT + timedelta(seconds=1),
    supersedes="op-0")

# A changed value for every field the ledger signs: nothing of what a person sees, who asked or which operation it is
# may change without the signature failing.
TAMPERED = {
    "schema_version": 2,
    "call_id": "call-2",
    "session_id": "ses-2",
    "tool": "cancel_order",
    "tool_schema_version": 2,
    "arguments": {"draft_id": "D-1", "revision": 3},
    "fingerprint": "sha256:" + "ab" * 31 + "ac",
    "operation_id": "op-2",
    "preview": {**REQUEST.preview, "amount_minor": 1},
    "requested_by": "victim",
    "assertion": "header.claims.other",
    "asserted_at": AT + timedelta(microseconds=1),
    "prepared_at": AT,
    "supersedes": None,
    "agent_reason": "an agent's words put in after the ledger signed",  # shown to the approver: signed too
}


def test_every_field_but_the_signature_is_covered() -> None:
    assert set(TAMPERED) == set(RequestApprovalV1.model_fields) - {"ledger_signature"}


def test_payload_is_canonical_json_without_the_signature_unset_fields_left_out() -> None:
    payload = json.loads(request_payload(REQUEST))
    assert "ledger_signature" not in payload and payload["supersedes"] == "op-0"
    assert payload["asserted_at"] == "2026-10-19T12:00:00.123456+00:00"
    assert request_payload(REQUEST.model_copy(update={"ledger_signature": "x"})) == request_payload(REQUEST)
    unset = REQUEST.model_copy(update={"supersedes": None})
    assert "supersedes" not in json.loads(request_payload(unset))  # a field added later signs nothing when unset


def test_sign_and_verify_round_trip_survives_the_wire() -> None:
    signed = sign_request(REQUEST, KEY)
    assert len(base64.b64decode(signed.ledger_signature, validate=True)) == 64
    assert verify_request(signed, KEY.public_key())
    # As the outbox stores it (JSON) and the approval service parses it.
    assert verify_request(RequestApprovalV1.model_validate(json.loads(signed.model_dump_json())), KEY.public_key())
    assert verify_request(RequestApprovalV1.model_validate_json(signed.model_dump_json()), KEY.public_key())
    # The same instant written with another offset is the same request.
    shifted = signed.asserted_at.astimezone(timezone(timedelta(hours=-5)))
    assert verify_request(signed.model_copy(update={"asserted_at": shifted}), KEY.public_key())


@pytest.mark.parametrize(("field", "value"), TAMPERED.items(), ids=list(TAMPERED))
def test_tampering_with_any_field_fails_verification(field: str, value: object) -> None:
    signed = sign_request(REQUEST, KEY)
    assert verify_request(signed, KEY.public_key())
    assert not verify_request(signed.model_copy(update={field: value}), KEY.public_key())


@pytest.mark.parametrize("change", [
    {"preview": {**REQUEST.preview, "notes": ["routine"]}},
    {"preview": {**REQUEST.preview, "details": {"lines": []}}},
    {"preview": {key: value for key, value in REQUEST.preview.items() if key != "currency"}},
    {"arguments": {**ARGUMENTS, "note": None}},
], ids=["a note added", "nested details", "a key removed", "a null argument added"])
def test_tampering_inside_the_preview_or_the_arguments_fails_verification(change: dict) -> None:
    assert not verify_request(sign_request(REQUEST, KEY).model_copy(update=change), KEY.public_key())


def test_a_signature_moved_onto_another_request_fails_verification() -> None:
    other = sign_request(REQUEST.model_copy(update={"operation_id": "op-9"}), KEY)
    assert not verify_request(REQUEST.model_copy(update={"ledger_signature": other.ledger_signature}),
                              KEY.public_key())


def test_wrong_key_fails_verification() -> None:
    assert not verify_request(sign_request(REQUEST, Ed25519PrivateKey.generate()), KEY.public_key())


@pytest.mark.parametrize("signature", [None, "", "not base64!", "AAAA", "é", base64.b64encode(b"\0" * 64).decode()])
def test_a_missing_or_malformed_signature_fails_verification(signature: str | None) -> None:
    assert not verify_request(REQUEST.model_copy(update={"ledger_signature": signature}), KEY.public_key())


def test_a_flipped_signature_bit_fails_verification() -> None:
    raw = bytearray(base64.b64decode(sign_request(REQUEST, KEY).ledger_signature))
    raw[-1] ^= 1
    flipped = REQUEST.model_copy(update={"ledger_signature": base64.b64encode(bytes(raw)).decode()})
    assert not verify_request(flipped, KEY.public_key())


def test_a_naive_datetime_is_refused() -> None:
    naive = REQUEST.model_copy(update={"asserted_at": AT.replace(tzinfo=None)})
    with pytest.raises(ValueError):
        request_payload(naive)
    signature = sign_request(REQUEST, KEY).ledger_signature
    assert not verify_request(naive.model_copy(update={"ledger_signature": signature}), KEY.public_key())
