"""The ledger's signature on its approval requests: round trip through the wire, every field covered, wrong keys and
missing or malformed signatures refused (the approval service's use of it: services/approval tests)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.erp.preview import PreviewV1
from erpilot_platform.ledger_signatures import SIGNATURE_FIELD, request_payload, sign_request, verify_request
from erpilot_platform.signed_messages import signature
from erpilot_platform.testing.previews import preview

pytestmark = pytest.mark.unit

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
AT = datetime(2026, 10, 19, 12, 0, 0, 123456, tzinfo=UTC)
ARGUMENTS = {"draft_id": "D-1", "revision": 2}
REQUEST = RequestApprovalV1(
    call_id="call-1", session_id="ses-1", tool="submit_order", tool_schema_version=1, arguments=ARGUMENTS,
    fingerprint="sha256:" + "ab" * 32, operation_id="op-1",
    preview=preview(object="Draft D-1 revision 2", target="Nordwind", amount_minor=1_250_000, currency="EUR",
                    effects=[{"label": "On hand SKU-A", "before": 12, "after": 5, "unit": "pcs"}],
                    details={"lines": [{"sku": "SKU-A", "qty": 7, "unit_price_minor": 178_571.5,
                                        "share": 0.1 + 0.2}]}),
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
    "preview": REQUEST.preview.model_copy(update={"amount_minor": 1}),
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
    {"preview": REQUEST.preview.model_copy(update={"notes": ["routine"]})},
    {"preview": REQUEST.preview.model_copy(update={"details": {"lines": []}})},
    {"preview": REQUEST.preview.model_copy(update={"currency": None})},
    {"preview": PreviewV1.model_validate({**REQUEST.preview.model_dump(), "invented": "by the agent"})},
    {"arguments": {**ARGUMENTS, "note": None}},
], ids=["a note added", "nested details", "a value removed", "a field added", "a null argument added"])
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


# --- the preview is typed (PreviewV1) on the receiving side, and the signature is still over what the ledger wrote ---
class OtherLedgersRequest(RequestApprovalV1):
    """The request as another version of the ledger writes it: its preview is whatever JSON that version wrote."""

    preview: dict  # type: ignore[assignment]


def _from_another_ledger(preview_json: dict) -> str:
    """The wire JSON of a request another ledger version signed, with this preview."""
    other = OtherLedgersRequest.model_validate({**REQUEST.model_dump(mode="json"), "preview": preview_json})
    signed = other.model_copy(update={SIGNATURE_FIELD: signature(other, KEY, signature_field=SIGNATURE_FIELD)})
    return signed.model_dump_json()


def test_a_field_a_newer_ledger_added_to_the_preview_is_kept_and_verifies() -> None:
    newer = {**REQUEST.preview.model_dump(mode="json"), "tax_minor": 237_500, "effects": [
        {"label": "On hand SKU-A", "before": 12, "after": 5, "unit": "pcs", "warehouse": "W1"}]}
    received = RequestApprovalV1.model_validate_json(_from_another_ledger(newer))
    assert verify_request(received, KEY.public_key())
    # Kept, and passed on (stored, shown) as the ledger wrote it.
    assert received.preview.model_dump(mode="json") == newer


def test_a_preview_field_the_ledger_did_not_write_and_this_contract_defaults_still_verifies() -> None:
    # An older ledger (or one from before a field joined PreviewV1): no effects, notes or details written; the typed
    # preview fills their defaults, which the ledger never signed.
    older = {"operation": "Adjust stock", "object": "SKU-A", "target": "SKU-A", "amount_minor": None}
    received = RequestApprovalV1.model_validate_json(_from_another_ledger(older))
    assert received.preview.notes == [] and received.preview.effects == []
    assert verify_request(received, KEY.public_key())


def test_the_previous_ledger_s_requests_still_verify() -> None:
    # What the ERP sent before the preview was typed (messages.preview_json: every field, nulls included).
    before = REQUEST.preview.model_dump(mode="json")
    assert verify_request(RequestApprovalV1.model_validate_json(_from_another_ledger(before)), KEY.public_key())


def test_a_received_preview_changed_after_parsing_fails_verification() -> None:
    received = RequestApprovalV1.model_validate_json(sign_request(REQUEST, KEY).model_dump_json())
    assert verify_request(received, KEY.public_key())
    changed = received.preview.model_copy(update={"amount_minor": 1})  # it remembers the JSON it came from
    assert not verify_request(received.model_copy(update={"preview": changed}), KEY.public_key())
