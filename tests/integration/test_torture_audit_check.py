"""The audit check of `erpilot torture` runs `erpilot audit verify`'s own verification on the real table: an intact
chain passes, a row changed in the database fails the run naming that row (a fresh database of the session's
PostgreSQL server with the approval schema; rows signed as the approval service signs them)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot.ops import audit
from erpilot.torture.approval_checks import check_audit
from erpilot.torture.checks import Findings
from erpilot_approval.app import MIGRATIONS
from erpilot_approval.domain.audit import GENESIS, chain_hash, event_of, sign
from erpilot_platform.migrations import upgrade
from erpilot_platform.testing.backends import execute_sql, scratch_database

pytestmark = pytest.mark.integration


@pytest.fixture
def approval_database(database_url):
    with scratch_database(database_url, "erpilot_audit_check") as url:
        upgrade(MIGRATIONS, url, "approval")
        yield url


def append_rows(url: str, key: Ed25519PrivateKey, count: int) -> None:
    prev = GENESIS
    at = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    for seq in range(1, count + 1):
        data = {"status": "approved", "n": seq}
        digest = chain_hash(prev, event_of(seq, at, "decision", f"p{seq}", f"op{seq}", "ann", data))
        execute_sql(url, "insert into approval.audit_log (seq, at, kind, pending_id, operation_id, actor, data, "
                         f"prev_hash, hash, signature) values ({seq}, '{at.isoformat()}', 'decision', 'p{seq}', "
                         f"'op{seq}', 'ann', '{{\"status\": \"approved\", \"n\": {seq}}}', '{prev}', '{digest}', "
                         f"'{sign(key, digest)}')")
        prev = digest


def test_an_intact_chain_passes_and_a_changed_row_fails_the_run(approval_database):
    key = Ed25519PrivateKey.generate()
    append_rows(approval_database, key, 3)

    intact = Findings()
    check_audit(asyncio.run(audit.verify(approval_database, key.public_key())), intact)
    assert intact.ok, intact.all()

    execute_sql(approval_database, """update approval.audit_log set data = '{"status": "rejected", "n": 2}'
                                      where seq = 2""")
    tampered = Findings()
    check_audit(asyncio.run(audit.verify(approval_database, key.public_key())), tampered)
    assert tampered.violations == ["erpilot audit verify: audit log BROKEN at row 2: its hash does not match its "
                                   "content (1 rows checked from the start)"]
