"""Grant signing: round trip, tampering, wrong keys (the development key files: test_dev_keys.py)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts.approval.v1 import GrantV1
from erpilot_platform.grants import (
    encode_public_key,
    encode_signing_key,
    grant_payload,
    load_signing_key,
    load_verify_key,
    sign_grant,
    verify_grant,
)

pytestmark = pytest.mark.unit

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
GRANT = GrantV1(
    pending_id="pa-1",
    operation_id="op-1",
    fingerprint="sha256:" + "ab" * 32,
    decided_by="bob",
    decided_at=datetime(2026, 10, 19, 12, 0, 0, 123456, tzinfo=UTC),
)


def test_payload_is_canonical_json_without_the_signature() -> None:
    expected = (
        b'{"decided_at":"2026-10-19T12:00:00.123456+00:00","decided_by":"bob",'
        b'"fingerprint":"sha256:' + b"ab" * 32 + b'","operation_id":"op-1","pending_id":"pa-1",'
        b'"schema_version":1}'
    )
    assert grant_payload(GRANT) == expected
    assert grant_payload(GRANT.model_copy(update={"signature": "x"})) == expected


def test_a_set_stock_check_is_signed_too() -> None:
    with_check = GRANT.model_copy(update={"stock_check": "sufficient"})
    assert b'"stock_check":"sufficient"' in grant_payload(with_check)
    assert not verify_grant(sign_grant(GRANT, KEY).model_copy(update={"stock_check": "sufficient"}), KEY.public_key())


def test_sign_and_verify_round_trip_survives_the_wire() -> None:
    signed = sign_grant(GRANT, KEY)
    assert len(base64.b64decode(signed.signature, validate=True)) == 64
    assert verify_grant(signed, KEY.public_key())
    assert verify_grant(GrantV1.model_validate_json(signed.model_dump_json()), KEY.public_key())
    # The same instant written with another offset is the same grant.
    shifted = signed.decided_at.astimezone(timezone(timedelta(hours=8)))
    assert verify_grant(signed.model_copy(update={"decided_at": shifted}), KEY.public_key())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pending_id", "pa-2"),
        ("operation_id", "op-2"),
        ("fingerprint", "sha256:" + "ab" * 31 + "ac"),
        ("decided_by", "mallory"),
        ("decided_at", GRANT.decided_at + timedelta(microseconds=1)),
        ("schema_version", 2),
    ],
)
def test_tampering_with_any_field_fails_verification(field: str, value: object) -> None:
    signed = sign_grant(GRANT, KEY)
    assert not verify_grant(signed.model_copy(update={field: value}), KEY.public_key())


@pytest.mark.parametrize("signature", ["", "not base64!", "AAAA", "é", base64.b64encode(b"\0" * 64).decode()])
def test_bad_signatures_fail_verification(signature: str) -> None:
    assert not verify_grant(GRANT.model_copy(update={"signature": signature}), KEY.public_key())


def test_a_flipped_signature_bit_fails_verification() -> None:
    raw = bytearray(base64.b64decode(sign_grant(GRANT, KEY).signature))
    raw[0] ^= 1
    flipped = GRANT.model_copy(update={"signature": base64.b64encode(bytes(raw)).decode()})
    assert not verify_grant(flipped, KEY.public_key())


def test_wrong_key_fails_verification() -> None:
    assert not verify_grant(sign_grant(GRANT, Ed25519PrivateKey.generate()), KEY.public_key())


def test_naive_datetime_is_refused() -> None:
    naive = GRANT.model_copy(update={"decided_at": GRANT.decided_at.replace(tzinfo=None)})
    with pytest.raises(ValueError):
        grant_payload(naive)
    assert not verify_grant(naive.model_copy(update={"signature": sign_grant(GRANT, KEY).signature}),
                            KEY.public_key())


def test_keys_round_trip_through_base64() -> None:
    private = load_signing_key(encode_signing_key(KEY))
    public = load_verify_key(encode_public_key(KEY.public_key()))
    assert verify_grant(sign_grant(GRANT, private), public)
    for bad in ("", "not base64", base64.b64encode(b"\1" * 31).decode()):
        with pytest.raises(ValueError):
            load_signing_key(bad)
        with pytest.raises(ValueError):
            load_verify_key(bad)
