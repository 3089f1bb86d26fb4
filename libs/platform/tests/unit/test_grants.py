"""Grant signing: round trip, tampering, wrong keys, and one key pair per data dir under concurrency."""

from __future__ import annotations

import base64
import stat
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts.approval.v1 import GrantV1
from erpilot_platform.grants import (
    PRIVATE_KEY_FILE,
    PUBLIC_KEY_FILE,
    encode_public_key,
    encode_signing_key,
    ensure_keypair,
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


def test_ensure_keypair_creates_once_then_reads(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    private, public = ensure_keypair(data_dir)
    again_private, again_public = ensure_keypair(data_dir)
    assert encode_signing_key(again_private) == encode_signing_key(private)
    assert encode_public_key(again_public) == encode_public_key(public)
    assert (data_dir / PUBLIC_KEY_FILE).read_text().strip() == encode_public_key(public)
    assert stat.S_IMODE((data_dir / PRIVATE_KEY_FILE).stat().st_mode) == 0o600
    assert sorted(p.name for p in data_dir.iterdir()) == [PRIVATE_KEY_FILE, PUBLIC_KEY_FILE]  # no temp files
    assert verify_grant(sign_grant(GRANT, private), load_verify_key(encode_public_key(public)))


def test_ensure_keypair_refuses_a_public_key_that_does_not_match(tmp_path: Path) -> None:
    ensure_keypair(tmp_path)
    (tmp_path / PUBLIC_KEY_FILE).write_text(encode_public_key(KEY.public_key()) + "\n")
    with pytest.raises(ValueError, match="does not match"):
        ensure_keypair(tmp_path)
    (tmp_path / PRIVATE_KEY_FILE).unlink()
    with pytest.raises(ValueError, match="without"):
        ensure_keypair(tmp_path)


def test_concurrent_threads_agree_on_one_key_pair(tmp_path: Path) -> None:
    start = threading.Barrier(16)
    results: list[str] = []

    def create() -> None:
        start.wait()
        private, public = ensure_keypair(tmp_path)
        results.append(encode_signing_key(private) + encode_public_key(public))

    threads = [threading.Thread(target=create) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 16 and len(set(results)) == 1


def test_concurrent_processes_agree_on_one_key_pair(tmp_path: Path) -> None:
    # Each process waits for the same instant, then races to create the pair.
    script = (
        "import sys, time; from pathlib import Path\n"
        "from erpilot_platform.grants import ensure_keypair, encode_public_key\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "print(encode_public_key(ensure_keypair(Path(sys.argv[1]))[1]))\n"
    )
    start_at = str(time.time() + 2.0)
    command = [sys.executable, "-c", script, str(tmp_path), start_at]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(8)]
    outputs = [process.communicate(timeout=60)[0].strip() for process in processes]
    assert all(process.returncode == 0 for process in processes)
    assert len(set(outputs)) == 1
    assert outputs[0] == (tmp_path / PUBLIC_KEY_FILE).read_text().strip()
