"""The audit check of `erpilot torture` runs `erpilot audit verify`'s own verification on the chain as the approval
service answers ``query.approval.audit_chain`` from the real table (its handler on its SQL unit of work, each page
through the wire's JSON): an intact chain passes, a row changed in the database fails the run naming that row (a
fresh database of the session's PostgreSQL server with the approval schema; rows signed as the service signs them).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot.ops import audit
from erpilot.torture.approval_checks import check_audit
from erpilot.torture.checks import Findings
from erpilot_approval.adapters import tables
from erpilot_approval.adapters.store import unit_of_work
from erpilot_approval.app import MIGRATIONS
from erpilot_approval.domain.audit import GENESIS, chain_hash, event_of, sign
from erpilot_approval.service_layer.audit_queries import audit_chain
from erpilot_contracts.approval.v1 import AuditChainPageV1, AuditChainQueryV1
from erpilot_platform.db import create_engine
from erpilot_platform.migrations import upgrade
from erpilot_platform.outbox import Outbox
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


async def verdict(url: str, key: Ed25519PrivateKey, *, page: int) -> tuple[bool, str]:
    """`erpilot audit verify`'s verdict on the chain the approval service answers, ``page`` rows at a time."""
    engine = create_engine(url, pool_size=1)
    ports = SimpleNamespace(unit=unit_of_work(engine, Outbox(tables.outbox, lock_key=0), key))

    async def ask(query: AuditChainQueryV1) -> AuditChainPageV1:
        answer = await audit_chain(query.model_copy(update={"limit": page}), ports)
        return AuditChainPageV1.model_validate_json(answer.model_dump_json())  # as the wire carries it

    try:
        return await audit.verify_chain(ask, key.public_key())
    finally:
        await engine.dispose()


def test_an_intact_chain_passes_and_a_changed_row_fails_the_run(approval_database):
    key = Ed25519PrivateKey.generate()
    append_rows(approval_database, key, 3)

    intact, whole = Findings(), asyncio.run(verdict(approval_database, key, page=2))  # two pages: 2 rows, then 1
    check_audit(whole, intact)
    assert intact.ok, intact.all()
    assert whole[1].startswith("audit log intact: 3 rows checked from the start to row 3")

    execute_sql(approval_database, """update approval.audit_log set data = '{"status": "rejected", "n": 2}'
                                      where seq = 2""")
    tampered = Findings()
    check_audit(asyncio.run(verdict(approval_database, key, page=2)), tampered)
    assert tampered.violations == ["erpilot audit verify: audit log BROKEN at row 2: its hash does not match its "
                                   "content (1 rows checked from the start)"]
