"""The audit chain's verification: an intact chain passes; a changed, deleted or inserted row is named."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_approval.domain.audit import AuditRow, Checkpoint, sign, sign_checkpoint, verify

pytestmark = pytest.mark.unit
KEY = Ed25519PrivateKey.generate()
OTHER_KEY = Ed25519PrivateKey.generate()
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def forge(seq: int, prev: str, key: Ed25519PrivateKey = KEY, **data) -> AuditRow:
    """A row as the writer makes it, computed here from the documented formula (not the module's helpers)."""
    at = T0 + timedelta(seconds=seq)
    event = {"seq": seq, "at": at.isoformat(), "kind": "vote", "pending_id": "pa_1", "operation_id": "op_1",
             "actor": "mia", "data": data or {"n": seq}}
    digest = hashlib.sha256(bytes.fromhex(prev) + rfc8785.dumps(event)).hexdigest()
    return AuditRow(seq, at, "vote", "pa_1", "op_1", "mia", event["data"], prev, digest, sign(key, digest))


def chain(length: int) -> list[AuditRow]:
    rows, prev = [], "0" * 64
    for seq in range(1, length + 1):
        rows.append(forge(seq, prev))
        prev = rows[-1].hash
    return rows


def test_an_intact_chain_passes() -> None:
    assert verify(chain(50), KEY.public_key()) == (None, 50)
    assert verify([], KEY.public_key()) == (None, 0)


def test_a_changed_row_is_named() -> None:
    rows = chain(10)
    rows[4] = replace(rows[4], data={"n": 999})
    broken, checked = verify(rows, KEY.public_key())
    assert (broken.seq, checked) == (5, 4)
    assert "content" in broken.reason


def test_a_changed_row_with_a_recomputed_hash_fails_on_its_signature() -> None:
    rows = chain(10)
    rows[4] = forge(5, rows[3].hash, OTHER_KEY, n=999)  # the attacker has no signing key
    assert verify(rows, KEY.public_key())[0].seq == 5


def test_a_deleted_row_is_named() -> None:
    rows = chain(10)
    del rows[6]
    broken, _ = verify(rows, KEY.public_key())
    assert broken.seq == 7 and "missing" in broken.reason


def test_an_inserted_row_is_named() -> None:
    rows = chain(10)
    inserted = forge(5, rows[3].hash, OTHER_KEY, n="forged")  # between 4 and the old 5, the rest renumbered
    shifted = [replace(r, seq=r.seq + 1) for r in rows[4:]]
    assert verify([*rows[:4], inserted, *shifted], KEY.public_key())[0].seq == 5
    appended = forge(11, rows[-1].hash, OTHER_KEY)  # at the end
    assert verify([*rows, appended], KEY.public_key())[0].seq == 11


def test_a_rewritten_chain_is_caught_by_the_checkpoints() -> None:
    rows = chain(10)
    mark = Checkpoint(8, rows[7].hash, T0, sign_checkpoint(KEY, 8, rows[7].hash))
    assert verify(rows, KEY.public_key(), [mark]) == (None, 10)
    assert verify(rows[:6], KEY.public_key(), [mark])[0].seq == 8  # the tail was cut below a checkpoint
    forged_mark = Checkpoint(8, rows[7].hash, T0, sign_checkpoint(OTHER_KEY, 8, rows[7].hash))
    assert verify(rows, KEY.public_key(), [forged_mark])[0].seq == 8


def test_verify_may_start_from_a_checkpoint() -> None:
    rows = chain(10)
    mark = Checkpoint(6, rows[5].hash, T0, sign_checkpoint(KEY, 6, rows[5].hash))
    assert verify(rows[6:], KEY.public_key(), [mark], start=mark) == (None, 4)
    tampered = [*rows[6:8], replace(rows[8], data={"n": 0}), rows[9]]
    assert verify(tampered, KEY.public_key(), [mark], start=mark)[0].seq == 9
