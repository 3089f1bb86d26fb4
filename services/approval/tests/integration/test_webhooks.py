"""Outgoing webhooks against a local receiver: Standard Webhooks signatures, retries with backoff after
500s, a receiver that is down at first, stable ids (a redelivered event adds nothing), the dead letter
after ``give_up_after``, and ``approval.expiring`` once per approval, after a restart, never after a
decision.

The receiver verifies each request the way a Standard Webhooks library does (independently of the
service's signing code). Events from earlier test modules may be replayed to the webhook consumers;
every assertion is about this test's own approvals.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import socket
import time
from collections import defaultdict
from contextlib import asynccontextmanager
from datetime import datetime

import asyncpg
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from erpilot_approval.adapters import tables
from erpilot_approval.adapters.store import unit_of_work
from erpilot_approval.app import build
from erpilot_approval.domain.webhooks import event_id
from erpilot_approval.service_layer.webhook_events import WebhookEvents
from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_platform import advisory_locks
from erpilot_platform.db import create_engine
from erpilot_platform.outbox import Outbox

from .conftest import actor

pytestmark = pytest.mark.integration
SECRET = "whsec_" + base64.b64encode(b"webhook-test-key-0123456789abcdef").decode()
MANAGER = actor("mia", "manager")
APPROVER = actor("bob", "approver")
REFUND = {"order_id": "O-5101", "amount_minor": 12000, "currency": "EUR", "channel": "original"}


def verify(headers, body: bytes) -> bool:
    """Standard Webhooks: base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")) in "v1,<sig>"."""
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(f"v1,{expected}", part) for part in headers["webhook-signature"].split())


class Receiver:
    """Records every attempt; ``/flaky`` answers 500 to the first two attempts of each id, ``/down`` always."""

    def __init__(self) -> None:
        self.attempts: list[dict] = []
        self.seen: dict[str, int] = defaultdict(int)

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        self.seen[(path, request.headers["webhook-id"])] += 1
        status = 200
        if path == "/down" or (path == "/flaky" and self.seen[(path, request.headers["webhook-id"])] <= 2):
            status = 500
        self.attempts.append({"path": path, "id": request.headers["webhook-id"], "status": status,
                              "timestamp": request.headers["webhook-timestamp"], "valid": verify(request.headers, body),
                              "body": body, "payload": json.loads(body)})
        return Response(status_code=status)

    def of(self, path: str, event_type: str, pending_id: str, *, status: int | None = None) -> list[dict]:
        return [a for a in self.attempts if a["path"] == path and a["payload"]["type"] == event_type
                and a["payload"]["data"].get("pending_id") == pending_id and (status is None or a["status"] == status)]

    async def wait(self, check, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while not (value := check()):
            if time.monotonic() > deadline:
                recent = [(a["path"], a["payload"]["type"]) for a in self.attempts[-10:]]
                raise AssertionError(f"not received within {timeout}s: {recent}")
            await asyncio.sleep(0.05)
        return value


@asynccontextmanager
async def serving(receiver: Receiver, port: int):
    app = Starlette(routes=[Route("/{name}", receiver.handle, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event for this)
        await asyncio.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        await task


@pytest.fixture(scope="module")
def ports():
    """Two distinct free ports (both sockets held while choosing, so the OS cannot hand out one twice)."""
    with socket.socket() as first, socket.socket() as second:
        first.bind(("127.0.0.1", 0))
        second.bind(("127.0.0.1", 0))
        return {"main": first.getsockname()[1], "late": second.getsockname()[1]}


@pytest.fixture(scope="module")
def webhook_settings(settings_for, ports, tmp_path_factory):
    policy = tmp_path_factory.mktemp("webhooks") / "policy.toml"
    policy.write_text('[tools.cancel_order]\nttl = "30s"\nwarn_before = "22s"\n\n'
                      f'[[webhooks]]\nurl = "http://127.0.0.1:{ports["main"]}/flaky"\nsecret = "{SECRET}"\n')
    hooks = [{"url": f"http://127.0.0.1:{ports['main']}/down", "events": ["approval.resolved"], "secret": SECRET},
             {"url": f"http://127.0.0.1:{ports['late']}/late", "events": ["approval.requested"], "secret": SECRET}]
    return lambda: settings_for(policy=policy, webhooks=json.dumps(hooks), webhook_retry_base_seconds=0.1,
                                webhook_give_up_after="8s", public_url="https://erpilot.example")


@pytest.fixture(scope="module")
async def receiver(ports):
    receiver = Receiver()
    async with serving(receiver, ports["main"]):
        yield receiver


@asynccontextmanager
async def running(settings):
    app = build(settings)
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


async def delivery_rows(database_url: str, pending_id: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetch("select * from approval.webhook_deliveries where pending_id = $1 order by url",
                                pending_id)
    finally:
        await conn.close()


async def test_a_request_is_signed_retried_after_two_500s_and_reaches_a_receiver_that_was_down(
        webhook_settings, receiver, approvals, ports, database_url):
    async with running(webhook_settings()):
        record = await approvals.create("refund_payment", arguments=REFUND, amount_minor=12000)
        pending_id = record["pending_id"]

        delivered = await receiver.wait(lambda: receiver.of("/flaky", "approval.requested", pending_id, status=200))
        attempts = receiver.of("/flaky", "approval.requested", pending_id)
        assert [a["status"] for a in attempts] == [500, 500, 200]
        assert all(a["valid"] for a in attempts)
        assert {a["id"] for a in attempts} == {event_id("approval.requested", pending_id)}
        assert len({a["body"] for a in attempts}) == 1  # the same bytes on every retry
        payload = delivered[0]["payload"]
        url = f"https://erpilot.example/resume/{pending_id}"
        assert payload["text"] == f"Refund 120.00 EUR on O-5101 awaits a manager — approve: <{url}>"
        assert payload["data"]["approval_url"] == url and payload["data"]["preview"]["amount_minor"] == 12000

        # The second receiver was down: the delivery waits, retried, and arrives once it is up.
        await until(lambda: any(r["url"].endswith("/late") and r["attempts"] >= 1 and r["status"] == "pending"
                                for r in rows_now), refresh=lambda: delivery_rows(database_url, pending_id))
        async with serving(receiver, ports["late"]):
            late = await receiver.wait(lambda: receiver.of("/late", "approval.requested", pending_id, status=200))
        assert late[0]["valid"] and late[0]["id"] == delivered[0]["id"]

        # A redelivered event (the consumer sees it again) adds no delivery: the id is stable.
        settings = webhook_settings()
        engine = create_engine(settings.database_url, pool_size=1)
        try:
            outbox = Outbox(tables.outbox, lock_key=advisory_locks.APPROVAL_OUTBOX)
            store = unit_of_work(engine, outbox, settings.signing_key())
            await WebhookEvents(store, settings.load_webhooks(settings.load_policy()),
                                settings.public_url).on_requested(pending_id)
        finally:
            await engine.dispose()
        rows = await delivery_rows(database_url, pending_id)
        assert sorted(r["url"].rsplit("/", 1)[1] for r in rows) == ["flaky", "late"]
        assert all(r["status"] == "delivered" for r in rows)
        assert len(receiver.of("/flaky", "approval.requested", pending_id)) == 3


async def test_a_decision_is_notified_and_a_receiver_that_never_answers_gets_a_dead_letter(
        webhook_settings, receiver, approvals, database_url):
    async with running(webhook_settings()):
        record = await approvals.create("refund_payment", arguments=REFUND, amount_minor=12000, requested_by="alice")
        pending_id = record["pending_id"]
        assert (await approvals.decide(record, "reject", MANAGER, comment="not this week")).ok

        resolved = await receiver.wait(lambda: receiver.of("/flaky", "approval.resolved", pending_id, status=200))
        data = resolved[0]["payload"]["data"]
        assert data["status"] == "rejected" and data["decided_by"] == "mia" and data["comment"] == "not this week"
        assert resolved[0]["payload"]["text"] == "Refund 120.00 EUR on O-5101 was rejected by mia"

        await until(lambda: any(r["url"].endswith("/down") and r["status"] == "dead" for r in rows_now),
                    refresh=lambda: delivery_rows(database_url, pending_id))
        down = receiver.of("/down", "approval.resolved", pending_id)
        assert len(down) >= 2 and all(a["status"] == 500 and a["valid"] for a in down)
        assert len({a["id"] for a in down}) == 1


async def test_operation_finished_names_the_approved_operation(webhook_settings, receiver, approvals, broker):
    async with running(webhook_settings()):
        record = await approvals.create("refund_payment", arguments=REFUND, amount_minor=12000, requested_by="alice")
        assert (await approvals.decide(record, "approve", MANAGER)).ok
        status = OperationStatusV1(operation_id=record["operation_id"], tool="refund_payment", status="committed",
                                   session_id=record["session_id"], result={"refund_id": "R-1"},
                                   committed_at=datetime.now().astimezone())
        await broker.publish(status.model_dump(mode="json"), subjects.ERP_EVT_OPERATION_FINISHED,
                             stream="ERPILOT_EVENTS", headers={"Nats-Msg-Id": f"test-{record['operation_id']}"})

        done = await receiver.wait(lambda: receiver.of("/flaky", "operation.finished", record["pending_id"],
                                                       status=200))
        assert done[0]["payload"]["text"] == "Refund 120.00 EUR on O-5101 was carried out"
        assert done[0]["payload"]["data"]["result"] == {"refund_id": "R-1"}


async def test_expiring_is_sent_once_after_a_restart_and_never_after_a_decision(
        webhook_settings, receiver, approvals, database_url):
    async with running(webhook_settings()):
        decided = await approvals.create("cancel_order", arguments={"order_id": "O-5101"})
        assert (await approvals.decide(decided, "approve", APPROVER)).ok
        waiting = await approvals.create("cancel_order", arguments={"order_id": "O-5102"})
    # Nothing runs while the warning time (22 s before the 30 s deadline) passes.
    warn_at = datetime.fromisoformat(waiting["expires_at"]).timestamp() - 22
    await asyncio.sleep(max(warn_at - time.time(), 0) + 0.5)
    async with running(webhook_settings()):
        warned = await receiver.wait(lambda: receiver.of("/flaky", "approval.expiring", waiting["pending_id"],
                                                         status=200))
        payload = warned[0]["payload"]
        assert payload["text"].startswith("Cancellation of O-5102 still awaits an approver and expires at ")
        assert datetime.fromisoformat(payload["data"]["expires_at"]) == datetime.fromisoformat(waiting["expires_at"])
        assert (await approvals.decide(waiting, "reject", APPROVER)).ok
        await receiver.wait(lambda: receiver.of("/flaky", "approval.resolved", waiting["pending_id"], status=200))
    # The decided approval's warning time came first: had it been warned, it would have been by now.
    assert len(receiver.of("/flaky", "approval.expiring", waiting["pending_id"], status=200)) == 1
    assert receiver.of("/flaky", "approval.expiring", decided["pending_id"]) == []
    assert not any(r["event_type"] == "approval.expiring" for r in await delivery_rows(database_url,
                                                                                         decided["pending_id"]))


rows_now: list = []


async def until(check, *, refresh, timeout: float = 30.0) -> None:
    """Poll ``refresh()`` into ``rows_now`` until ``check()`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        rows_now[:] = await refresh()
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {[dict(r) for r in rows_now]}")
        await asyncio.sleep(0.05)
