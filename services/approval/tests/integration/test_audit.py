"""The audit log on real PostgreSQL: a busy log verifies; every change, deletion or insertion is named by
``verify``; the ledger's outcome is recorded once; checkpoints are signed. A database of its own, so its
chain holds exactly what this module's service wrote."""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import text

from erpilot.ops.audit import export_chain, verify_chain
from erpilot.stack.stack import migrate_all
from erpilot_approval.adapters import audit_log
from erpilot_approval.app import build
from erpilot_approval.domain.audit import sign
from erpilot_contracts import requests, subjects
from erpilot_contracts.approval.v1 import DecideManyV1, DecisionItemV1
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_platform.broker import call
from erpilot_platform.db import create_engine
from erpilot_platform.testing.backends import scratch_database

from .conftest import SIGNING_KEY, VERIFY_KEY, actor, cancelled

pytestmark = pytest.mark.integration
BOB, MIA = actor("bob", "approver"), actor("mia", "manager")


@pytest.fixture(scope="module")
def audit_db(database_url):
    with scratch_database(database_url, "erpilot_audit") as url:
        migrate_all(url)
        yield url


@pytest.fixture(scope="module")
async def service(settings_for, audit_db):
    app = build(settings_for(database_url=audit_db, audit_checkpoint_seconds=3600))
    await app.start()
    yield app
    await app.stop()


@pytest.fixture(scope="module")
async def engine(audit_db):
    engine = create_engine(audit_db, pool_size=2)
    yield engine
    await engine.dispose()


async def kinds_of(engine, **where) -> list[str]:
    async with engine.connect() as conn:
        return [row.kind for row in await audit_log.of(conn, **where)]


async def tampered_verdict(engine, *statements: str):
    """Verify the chain as it would be after ``statements`` (an owner's edits), then roll them back."""
    async with engine.connect() as conn:
        trans = await conn.begin()
        try:
            for statement in statements:
                await conn.execute(text(statement))
            return await audit_log.verify_chain(conn, VERIFY_KEY)
        finally:
            await trans.rollback()


async def busy_log(approvals, events, broker) -> dict[str, dict]:
    """Requests, quorum-free decisions racing, an edit, a withdrawal, a bulk decision, an expiry, outcomes."""
    racing = [await approvals.create("submit_order") for _ in range(6)]
    await asyncio.gather(*(approvals.decide(r, action, actor(f"approver-{i}", "approver"))
                           for r in racing for i, action in enumerate(("approve", "reject", "approve"))))
    edited = await approvals.create("submit_order")
    assert (await approvals.edit(edited, {"draft_id": "D-1", "revision": 2}, BOB)).ok
    bulk = [await approvals.create("submit_order") for _ in range(3)]
    assert (await approvals.send(subjects.APPROVAL_CMD_DECIDE_MANY, DecideManyV1(
        action="approve", actor=BOB,
        items=[DecisionItemV1(pending_id=r["pending_id"], fingerprint=r["fingerprint"]) for r in bulk]))).ok
    withdrawn = await approvals.create("submit_order", requested_by="alice")
    cancel = cancelled(withdrawn["session_id"], withdrawn["call_id"])  # the agent's record of the owner's cancel
    await broker.publish(cancel.model_dump(mode="json"), subjects.AGENT_EVT_RUN_CANCELLED, stream="ERPILOT_EVENTS",
                         headers={"Nats-Msg-Id": f"t-{secrets.token_hex(6)}"})
    await events.wait(lambda: events.of(withdrawn["pending_id"]))
    expiring = await approvals.create("cancel_order")  # 2 s ttl
    await events.wait(lambda: events.of(expiring["pending_id"]), timeout=30)
    committed = bulk[0]
    status = OperationStatusV1(operation_id=committed["operation_id"], tool="submit_order", status="committed",
                               session_id=committed["session_id"], committed_at=datetime.now().astimezone())
    for _ in range(2):  # redelivered: recorded once
        await broker.publish(status.model_dump(mode="json"), subjects.ERP_EVT_OPERATION_FINISHED,
                             stream="ERPILOT_EVENTS", headers={"Nats-Msg-Id": f"t-{secrets.token_hex(6)}"})
    return {"racing": racing[0], "edited": edited, "bulk": committed, "withdrawn": withdrawn, "expiring": expiring}


async def test_a_busy_log_verifies_and_records_every_kind_of_change(service, approvals, events, broker, engine,
                                                                    audit_db, tmp_path) -> None:
    made = await busy_log(approvals, events, broker)

    async def outcome_recorded():
        return "grant_consumed" in await kinds_of(engine, operation_id=made["bulk"]["operation_id"])

    await events.wait_async(outcome_recorded)
    assert await kinds_of(engine, operation_id=made["bulk"]["operation_id"]) == [
        "request", "vote", "decision", "grant_issued", "commit_outcome", "grant_consumed"]
    racing = await kinds_of(engine, pending_id=made["racing"]["pending_id"])
    assert racing[:3] == ["request", "vote", "decision"] and racing.count("decision") == 1
    assert await kinds_of(engine, pending_id=made["edited"]["pending_id"]) == ["request", "edit"]
    assert await kinds_of(engine, pending_id=made["withdrawn"]["pending_id"]) == ["request", "withdrawal"]
    assert await kinds_of(engine, pending_id=made["expiring"]["pending_id"]) == ["request", "expiry"]

    # `erpilot audit` asks the service running on this database (query.approval.audit_chain) and checks it itself.
    async def ask(query):
        return await call(broker, requests.APPROVAL_AUDIT_CHAIN, query)

    intact, said = await verify_chain(ask, VERIFY_KEY)
    assert intact, said
    async with engine.connect() as conn:
        verdict = await audit_log.verify_chain(conn, VERIFY_KEY)
    assert verdict.broken is None and verdict.checked == verdict.head >= 40

    out = tmp_path / "audit.jsonl"
    with out.open("w") as handle:
        assert await export_chain(ask, handle) == verdict.head
    assert out.read_text().count("\n") == verdict.head


@pytest.mark.parametrize(("statements", "seq"), [
    (["UPDATE approval.audit_log SET data = '{\"status\": \"approved\"}' WHERE seq = 7"], 7),
    (["UPDATE approval.audit_log SET actor = 'mallory' WHERE seq = 3"], 3),
    (["UPDATE approval.audit_log SET at = at + interval '1 second' WHERE seq = 12"], 12),
    (["DELETE FROM approval.audit_log WHERE seq = 9"], 9),
    (["DELETE FROM approval.audit_log WHERE seq = 1"], 1),
    # inserted in the middle: everything from 5 on moves up one, and a forged row takes 5
    (["UPDATE approval.audit_log SET seq = -seq - 1 WHERE seq >= 5",
      "UPDATE approval.audit_log SET seq = -seq WHERE seq < 0",
      "INSERT INTO approval.audit_log SELECT 5, at, 'decision', pending_id, operation_id, 'mallory', data,"
      " prev_hash, hash, signature FROM approval.audit_log WHERE seq = 6"], 5),
])
async def test_changing_deleting_or_inserting_any_row_makes_verify_name_it(service, engine, statements, seq) -> None:
    verdict = await tampered_verdict(engine, *statements)
    assert verdict.broken is not None and verdict.broken.seq == seq, verdict


async def test_a_forged_row_at_the_end_with_a_correct_hash_is_named(service, engine) -> None:
    async with engine.connect() as conn:
        head, digest = await audit_log.head(conn)
    forged = "f" * 64  # whatever the attacker computes, the signature needs the service's key
    signature = sign(Ed25519PrivateKey.generate(), forged)
    verdict = await tampered_verdict(engine, (
        f"INSERT INTO approval.audit_log VALUES ({head + 1}, now(), 'grant_issued', 'pa_x', 'op_x', 'mallory', '{{}}', "
        f"'{digest}', '{forged}', '{signature}')"))
    assert verdict.broken.seq == head + 1


async def test_checkpoints_are_signed_and_verify_can_start_from_one(service, engine, approvals) -> None:
    await approvals.create("submit_order")
    async with engine.begin() as conn:
        mark = await audit_log.checkpoint(conn, SIGNING_KEY)
    assert mark is not None
    await approvals.create("submit_order")
    async with engine.connect() as conn:
        verdict = await audit_log.verify_chain(conn, VERIFY_KEY, from_checkpoint=True)
    assert verdict.broken is None and verdict.start.seq == mark.seq and verdict.checked >= 1
    rewritten = await tampered_verdict(engine, f"DELETE FROM approval.audit_log WHERE seq >= {mark.seq}")
    assert rewritten.broken.seq == mark.seq  # the tail was cut below a signed head

