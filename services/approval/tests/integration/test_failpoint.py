"""The approval service's crash points (docs/FAILPOINTS.md), each killing a real replica (a subprocess armed with
``ERPILOT_FAILPOINTS``, exit 137) on real NATS and PostgreSQL; a fresh replica then takes over the durable
consumers. The unacknowledged message comes back (after the ack wait) and nothing is lost or done twice:

- ``approval.decide.after_db_commit``: the next replica's relay publishes the decision and its
  ``cmd.erp.commit``; the person's retry gets the recorded result, without a second event or commit;
- ``approval.request.before_db_commit`` / ``after_db_commit``: the ledger's request (from the ERP's outbox,
  never acknowledged) is stored exactly once, with one ``evt.approval.requested``;
- ``approval.edit.after_intent``: the redelivered edit finds its intent, asks the ERP and makes one new version.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from erpilot_approval.app import build
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import DecideV1, EditApprovalV1, ListApprovalsV1, RequestApprovalV1
from erpilot_contracts.subjects import COMMANDS_STREAM
from erpilot_platform.broker import ServiceUnavailable, request
from erpilot_platform.testing.readiness import wait_answering

from .conftest import actor, later_marker

pytestmark = pytest.mark.integration
BOB = actor("bob", "approver")


def consumer_of(subject: str) -> str:
    return f"approval__{subject.replace('.', '_')}"


async def redelivered_and_acknowledged(broker, subject: str, timeout: float = 90.0) -> None:
    """Wait until the consumer of ``subject`` holds nothing: the command the dead replica never acknowledged
    was redelivered (after the ack wait) and handled, so its effects, if any, are in."""
    js = broker.config.connection_state.stream
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = await js.consumer_info(COMMANDS_STREAM.name, consumer_of(subject))
        if info.num_ack_pending == 0 and info.num_pending == 0 and info.num_redelivered == 0:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the {subject} command is still unacknowledged: {info}")


@asynccontextmanager
async def armed_replica(settings, broker, tmp_path, failpoint: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """A replica of the approval service (``erpilot serve approval``'s entry) with ``failpoint`` armed; the
    block must make it reach the point (it is killed on the way out if it did not die)."""
    env = {**os.environ, "ERPILOT_DATABASE_URL": settings.database_url, "ERPILOT_NATS_URL": settings.nats_url,
           "ERPILOT_POLICY": str(settings.policy), "ERPILOT_GRANT_SIGNING_KEY": settings.grant_signing_key,
           "ERPILOT_ASSERTION_VERIFY_KEY": settings.assertion_verify_key,
           "ERPILOT_LEDGER_VERIFY_KEY": settings.ledger_verify_key,
           "ERPILOT_DATA_DIR": str(tmp_path), "ERPILOT_FAILPOINTS": f"{failpoint}=crash"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from erpilot_approval.app import main; main()", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        def check_alive() -> None:
            assert proc.returncode is None, f"the service exited with {proc.returncode}"

        await wait_answering(broker, "approval", check_alive)
        yield proc
        assert await asyncio.wait_for(proc.wait(), 10) == 137  # it died at the failpoint, not of something else
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@asynccontextmanager
async def next_replica(settings_for) -> AsyncIterator[None]:
    app = build(settings_for())
    await app.start()
    try:
        yield
    finally:
        await app.stop()


def requested_for(events, operation_id: str) -> list[dict]:
    return [body["record"] for _, subject, body in events.items
            if subject == subjects.APPROVAL_EVT_REQUESTED and body["record"]["operation_id"] == operation_id]


async def test_a_crash_after_the_decision_commit_loses_nothing(settings_for, broker, approvals, events,
                                                             tmp_path) -> None:
    async with armed_replica(settings_for(), broker, tmp_path, "approval.decide.after_db_commit"):
        record = await approvals.create("submit_order")
        with pytest.raises(ServiceUnavailable):  # no answer: the replica died after its commit
            cmd = DecideV1(pending_id=record["pending_id"], action="approve", fingerprint=record["fingerprint"],
                           actor=BOB)
            await request(broker, subjects.APPROVAL_REQ_DECIDE, cmd, durable=False, timeout=3)

    async with next_replica(settings_for):
        (_, body), = await events.wait(lambda: events.of(record["pending_id"]), timeout=10)
        assert (body["status"], body["decided_by"]) == ("approved", "bob") and body["grant"]
        # A core request (issue 31): nothing redelivers it; the decision was stored before the answer, and the
        # gateway's retry (or the person's) with the same decision is answered the recorded one.
        retry = await approvals.decide(record, "approve", BOB)
        assert retry.ok and (retry.data["status"], retry.data["decided_at"]) == ("approved", body["decided_at"])
        await later_marker(approvals, events)
        assert len(events.of(record["pending_id"])) == 1
        [(commit, msg_id)] = events.commits_of(record["operation_id"])  # one commit, with the decision's grant
        assert commit["grant"] == body["grant"] and msg_id.startswith(f"erp.commit.{record['operation_id']}.")


@pytest.mark.parametrize("failpoint", ["approval.request.before_db_commit", "approval.request.after_db_commit"])
async def test_a_crash_around_the_request_commit_stores_the_ledgers_request_once(
        settings_for, broker, approvals, events, tmp_path, failpoint) -> None:
    cmd = approvals.request_cmd("submit_order")
    async with armed_replica(settings_for(), broker, tmp_path, failpoint):
        await publish_as_the_erp_outbox(broker, cmd)

    async with next_replica(settings_for):
        [record] = await events.wait(lambda: requested_for(events, cmd.operation_id), timeout=60)
        await redelivered_and_acknowledged(broker, subjects.APPROVAL_CMD_REQUEST)
        await later_marker(approvals, events)
        assert len(requested_for(events, cmd.operation_id)) == 1  # one approval, announced once
        listed = await approvals.send(subjects.APPROVAL_QUERY_LIST, ListApprovalsV1(
            actor=actor("boss", "approver", "manager"), session_id=cmd.session_id, status=None), durable=False)
        assert [item["pending_id"] for item in listed.data["items"]] == [record["pending_id"]]


async def publish_as_the_erp_outbox(broker, cmd: RequestApprovalV1) -> None:
    """What the ERP's outbox relay does with the request it stored with the prepared operation."""
    await broker.publish(cmd.model_dump_json().encode(), subjects.APPROVAL_CMD_REQUEST,
                         headers={"Nats-Msg-Id": f"approval.request.{cmd.operation_id}"},
                         stream=COMMANDS_STREAM.name)


async def test_a_crash_after_the_edit_intent_makes_one_new_version_on_redelivery(
        settings_for, broker, approvals, events, fake_erp, tmp_path) -> None:
    async with armed_replica(settings_for(), broker, tmp_path, "approval.edit.after_intent"):
        old = await approvals.create("submit_order", arguments={"draft_id": "D-1", "revision": 1})
        edit = EditApprovalV1(pending_id=old["pending_id"], fingerprint=old["fingerprint"],
                              arguments={"draft_id": "D-1", "revision": 2}, actor=BOB)
        with pytest.raises(ServiceUnavailable):  # no answer: the replica died with the intent recorded
            await request(broker, subjects.APPROVAL_CMD_EDIT, edit, durable=True, timeout=3)
    asked = [cmd for cmd in fake_erp.seen if cmd.supersedes == old["operation_id"]]
    assert asked == []  # the ERP was not asked before the crash

    async with next_replica(settings_for):
        [new] = await events.wait(lambda: [body["record"] for _, subject, body in events.items
                                           if subject == subjects.APPROVAL_EVT_REQUESTED
                                           and body["record"]["supersedes"] == old["pending_id"]], timeout=60)
        await redelivered_and_acknowledged(broker, subjects.APPROVAL_CMD_EDIT)
        again = await approvals.edit(old, {"draft_id": "D-1", "revision": 2}, BOB)  # the person retries
        assert again.ok and again.data["pending_id"] == new["pending_id"]
        assert len([cmd for cmd in fake_erp.seen if cmd.supersedes == old["operation_id"]]) == 1
        assert (await approvals.get(old["pending_id"], BOB)).data["status"] == "superseded"
