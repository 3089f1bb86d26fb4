"""``approval.decide.after_db_commit``: the replica dies after storing a decision, before publishing or
answering. Nothing is lost: the next replica's relay publishes the decision and its ``cmd.erp.commit`` from the
outbox, and the person's retry gets the recorded result without a second event or a second commit.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from erpilot_approval.app import build
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import DecideV1
from erpilot_platform.broker import ServiceUnavailable, request
from erpilot_platform.testing.readiness import wait_answering

from .conftest import actor, later_marker

DECIDE_CONSUMER = "approval__erpilot_v1_cmd_approval_decide"


async def redelivered_and_acknowledged(broker, timeout: float = 90.0) -> None:
    """Wait until the decide consumer holds nothing: the command the dead replica never acknowledged
    was redelivered (after the ack wait) and handled, so its effects, if any, are in."""
    js = broker.config.connection_state.stream
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = await js.consumer_info("ERPILOT_COMMANDS", DECIDE_CONSUMER)
        if info.num_ack_pending == 0 and info.num_pending == 0 and info.num_redelivered == 0:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the decide command is still unacknowledged: {info}")

pytestmark = pytest.mark.integration


async def test_a_crash_after_the_decision_commit_loses_nothing(settings_for, broker, approvals, events,
                                                             tmp_path) -> None:
    settings = settings_for()
    env = {**os.environ, "ERPILOT_DATABASE_URL": settings.database_url, "ERPILOT_NATS_URL": settings.nats_url,
           "ERPILOT_POLICY": str(settings.policy), "ERPILOT_GRANT_SIGNING_KEY": settings.grant_signing_key,
           "ERPILOT_ASSERTION_VERIFY_KEY": settings.assertion_verify_key,
           "ERPILOT_DATA_DIR": str(tmp_path), "ERPILOT_FAILPOINTS": "approval.decide.after_db_commit=crash"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from erpilot_approval.app import main; main()", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        def check_alive() -> None:
            assert proc.returncode is None, f"the service exited with {proc.returncode}"

        await wait_answering(broker, "approval", check_alive)
        record = await approvals.create("submit_order")
        bob = actor("bob", "approver")
        with pytest.raises(ServiceUnavailable):  # no answer: the replica died after its commit
            cmd = DecideV1(pending_id=record["pending_id"], action="approve", fingerprint=record["fingerprint"],
                           actor=bob)
            await request(broker, subjects.APPROVAL_CMD_DECIDE, cmd, durable=True, timeout=3)
        assert await asyncio.wait_for(proc.wait(), 10) == 137
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    app = build(settings_for())
    await app.start()
    try:
        (_, body), = await events.wait(lambda: events.of(record["pending_id"]), timeout=10)
        assert (body["status"], body["decided_by"]) == ("approved", "bob") and body["grant"]
        retry = await approvals.decide(record, "approve", bob)  # the person retries after the error
        assert retry.ok and (retry.data["status"], retry.data["decided_at"]) == ("approved", body["decided_at"])
        await redelivered_and_acknowledged(broker)  # the crashed replica's unacked command came back
        await later_marker(approvals, events)
        assert len(events.of(record["pending_id"])) == 1
        [(commit, msg_id)] = events.commits_of(record["operation_id"])  # one commit, with the decision's grant
        assert (commit["grant"], msg_id) == (body["grant"], f"erp.commit.{record['operation_id']}")
    finally:
        await app.stop()
