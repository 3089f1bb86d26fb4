"""The approval service running in-process (``build(ApprovalSettings(...)).start()``) on real NATS and
PostgreSQL. Tests talk to it only over NATS with the contracts, and watch its events on JetStream.

``cancel_order`` has a 2 s ttl here so expiry can be watched; the other tools keep the defaults.
``Approvals.create`` sends ``cmd.approval.request`` as the ERP's outbox would: the ledger's record, with the
gateway's assertion for its requester (``ASSERTION_KEY``), signed with the ledger's key (``LEDGER_KEY``), and keeps
it in the fake ledger. The fake ERP answers
``cmd.erp.prepare`` for edits (``draft_id`` "D-GONE" is a business rejection) and, as the real one does, sends
the edited version's ``cmd.approval.request`` (with ``supersedes``) back through JetStream, built from its own
record of the operation it supersedes.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import nats
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.js.api import DeliverPolicy

from erpilot_approval.app import build
from erpilot_approval.settings import ApprovalSettings
from erpilot_contracts import requests as endpoints
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.approval.v1 import Actor, DecideV1, EditApprovalV1, GetApprovalV1, RequestApprovalV1
from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.erp.v1 import PreparedOperationV1, PrepareOperationV1, PreviewV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.subjects import COMMANDS_STREAM
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.broker import create_broker, request, send
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.grants import encode_public_key, encode_signing_key
from erpilot_platform.ledger_signatures import sign_request
from erpilot_platform.testing.previews import preview as a_preview

SIGNING_KEY = Ed25519PrivateKey.generate()
VERIFY_KEY = SIGNING_KEY.public_key()
ASSERTION_KEY = Ed25519PrivateKey.generate()  # the gateway's
LEDGER_KEY = Ed25519PrivateKey.generate()  # the ERP's: it signs the approval requests it sends
POLICY = '[tools.cancel_order]\nttl = "2s"\n'


def uid(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def settings_for(database_url, nats_url, tmp_path_factory) -> Callable[..., ApprovalSettings]:
    directory = tmp_path_factory.mktemp("approval")
    policy = directory / "policy.toml"
    policy.write_text(POLICY)

    def make(**changes: Any) -> ApprovalSettings:
        values = dict(database_url=database_url, nats_url=nats_url, data_dir=directory, policy=policy,
                      grant_signing_key=encode_signing_key(SIGNING_KEY),
                      assertion_verify_key=encode_public_key(ASSERTION_KEY.public_key()),
                      ledger_verify_key=encode_public_key(LEDGER_KEY.public_key()))
        return ApprovalSettings(**{**values, **changes})

    return make


@pytest.fixture(scope="module")
async def approval_service(settings_for):
    app = build(settings_for())
    await app.start()
    yield app
    await app.stop()


class Events:
    """Every ``evt.approval.*`` published from now on, with the wall-clock time it arrived; and every
    ``cmd.erp.commit`` (``commits``: its body and ``Nats-Msg-Id``)."""

    def __init__(self) -> None:
        self.items: list[tuple[float, str, dict]] = []
        self.commits: list[tuple[dict, str]] = []
        self._nc = None

    async def start(self, nats_url: str) -> Events:
        self._nc = await nats.connect(nats_url)
        js = self._nc.jetstream()

        async def on_message(msg) -> None:
            self.items.append((time.time(), msg.subject, json.loads(msg.data)))

        async def on_commit(msg) -> None:
            self.commits.append((json.loads(msg.data), (msg.headers or {}).get("Nats-Msg-Id", "")))

        await js.subscribe("erpilot.v1.evt.approval.>", cb=on_message, ordered_consumer=True,
                           deliver_policy=DeliverPolicy.NEW)
        await js.subscribe(subjects.ERP_CMD_COMMIT, cb=on_commit, ordered_consumer=True,
                           deliver_policy=DeliverPolicy.NEW, stream=COMMANDS_STREAM.name)
        return self

    def commits_of(self, operation_id: str) -> list[tuple[dict, str]]:
        return [(body, msg_id) for body, msg_id in self.commits if body["operation_id"] == operation_id]

    async def stop(self) -> None:
        await self._nc.close()

    def of(self, pending_id: str, kind: str = "resolved") -> list[tuple[float, dict]]:
        subject = subjects.APPROVAL_EVT_RESOLVED if kind == "resolved" else subjects.APPROVAL_EVT_REQUESTED
        key = (lambda body: body["pending_id"]) if kind == "resolved" else (lambda body: body["record"]["pending_id"])
        return [(at, body) for at, subj, body in self.items if subj == subject and key(body) == pending_id]

    def refused(self, operation_id: str) -> list[dict]:
        """The ``evt.approval.request_refused`` of an operation."""
        return [body for _, subject, body in self.items
                if subject == subjects.APPROVAL_EVT_REQUEST_REFUSED and body["operation_id"] == operation_id]

    async def wait_async(self, check: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Like ``wait``, for a check that is a coroutine (a database read)."""
        deadline = time.monotonic() + timeout
        while not (value := await check()):
            if time.monotonic() > deadline:
                raise AssertionError(f"not true within {timeout}s")
            await asyncio.sleep(0.05)
        return value

    async def wait(self, check: Callable[[], Any], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := check()):
            if time.monotonic() > deadline:
                raise AssertionError(f"no such event within {timeout}s; got {[s for _, s, _ in self.items]}")
            await asyncio.sleep(0.02)
        return value


@pytest.fixture
async def events(nats_url):
    collector = await Events().start(nats_url)
    yield collector
    await collector.stop()


async def later_marker(approvals: Approvals, events: Events, *, expiring: bool = False) -> None:
    """Wait for the event of an approval requested now (``expiring``: for its expiry, 2 s later).

    Events arrive in stream order and the service publishes its outbox in id order, so whatever an
    earlier command emitted has arrived once the marker has: "no second event" is then a fact, not
    the hope of a sleep. An expiring marker also proves a sweep ran after everything before it.
    """
    record = await approvals.create("cancel_order" if expiring else "submit_order")
    kind = "resolved" if expiring else "requested"
    await events.wait(lambda: events.of(record["pending_id"], kind), timeout=30)


def cancelled(session_id: str, *call_ids: str, owner: str = "alice", vouched_for: str | None = None,
              key: Ed25519PrivateKey = ASSERTION_KEY, signed_at: datetime | None = None,
              run_id: str | None = None) -> RunCancelledV1:
    """The agent's record of a cancel of ``run_id`` (default: the run of the first call, ``<run_id>:…``), with the
    assertion of the gateway's cancel command (for the owner)."""
    now, run_id = datetime.now(UTC), run_id or call_ids[0].partition(":")[0]
    assertion = sign_assertion(key, sub=vouched_for or owner, roles=["requester"], session_id=session_id,
                               run_id=run_id, cancel=True, now=signed_at or now)
    return RunCancelledV1(session_id=session_id, run_id=run_id, owner=owner, call_ids=list(call_ids),
                          cancelled_at=now, assertion=assertion)


def actor(sub: str, *roles: str) -> Actor:
    return Actor(sub=sub, roles=list(roles))


ARGUMENTS = {
    "submit_order": {"draft_id": "D-1", "revision": 1},
    "cancel_order": {"order_id": "O-1"},
    "adjust_stock": {"sku": "SKU-1", "delta": -2, "reason": "count"},
    "refund_payment": {"order_id": "O-1", "amount_minor": 500, "currency": "EUR", "channel": "original"},
}


class FakeLedger:
    """What the fake ERP holds: the ``cmd.erp.prepare`` commands it saw, and its record of every operation (the
    request it sent for it, assertion included)."""

    def __init__(self) -> None:
        self.seen: list[PrepareOperationV1] = []
        self.operations: dict[str, RequestApprovalV1] = {}

    def __getitem__(self, index: int) -> PrepareOperationV1:
        return self.seen[index]

    def record(self, cmd: RequestApprovalV1) -> None:
        self.operations[cmd.operation_id] = cmd


def vouch(cmd: RequestApprovalV1, *, key: Ed25519PrivateKey = ASSERTION_KEY, sub: str | None = None,
          session_id: str | None = None, at: datetime | None = None, run_id: str | None = None) -> RequestApprovalV1:
    """``cmd`` with the gateway's assertion for its requester in its session (for its call, or with ``run_id`` the
    chat run's), accepted by the ledger ``at`` (now), and signed by the ledger."""
    moment = at or datetime.now(UTC)
    bound = {"run_id": run_id} if run_id is not None else {"call_id": cmd.call_id, "tool": cmd.tool}
    assertion = sign_assertion(key, sub=sub or cmd.requested_by, roles=["requester"],
                               session_id=session_id or cmd.session_id, now=moment, **bound)
    return signed(cmd.model_copy(update={"assertion": assertion, "asserted_at": moment, "prepared_at": moment}))


def signed(cmd: RequestApprovalV1, key: Ed25519PrivateKey = LEDGER_KEY) -> RequestApprovalV1:
    """``cmd`` as the ledger's outbox sends it: signed with its key (``key``: another one, to forge)."""
    return sign_request(cmd, key)


class Approvals:
    """The approval service as its callers see it: contracts over NATS."""

    def __init__(self, broker, ledger: FakeLedger) -> None:
        self.broker = broker
        self.ledger = ledger

    async def send(self, subject: str, payload: Message, *, durable: bool = True) -> ReplyV1:
        return await request(self.broker, subject, payload, durable=durable, timeout=20)

    def request_cmd(self, tool: str = "submit_order", *, arguments: dict | None = None, amount_minor: int = 12_345,
                    requested_by: str = "alice", run_id: str | None = None, **changes: Any) -> RequestApprovalV1:
        """The ledger's request for a new operation (fresh ids), vouched for by the gateway (``run_id``: a call of
        that chat run, with the run's assertion), held by the ledger."""
        args = arguments if arguments is not None else ARGUMENTS[tool]
        values = dict(call_id=f"{run_id or uid('run_')}:{uid('call-')}", session_id=uid("ses-"), tool=tool,
                      arguments=args,
                      fingerprint=fingerprint(tool, 1, args), operation_id=uid("op-"), requested_by=requested_by,
                      preview=a_preview(tool, "x", "y", amount_minor=amount_minor, currency="EUR"))
        cmd = vouch(RequestApprovalV1(**{**values, **changes}), run_id=run_id)
        self.ledger.record(cmd)
        return cmd

    async def create(self, tool: str = "submit_order", **kwargs: Any) -> dict:
        reply = await self.send(subjects.APPROVAL_CMD_REQUEST, self.request_cmd(tool, **kwargs))
        assert reply.ok, reply
        return reply.data

    async def decide(self, record: dict, action: str, who: Actor, *, fingerprint: str | None = None,
                     comment: str | None = None) -> ReplyV1:
        cmd = DecideV1(pending_id=record["pending_id"], action=action, actor=who, comment=comment,
                       fingerprint=record["fingerprint"] if fingerprint is None else fingerprint)
        # As the gateway sends it: a core request, sent again while unanswered (issue 31).
        return await send(self.broker, endpoints.APPROVAL_DECIDE, cmd, timeout=20)

    async def edit(self, record: dict, arguments: dict, who: Actor, *, fingerprint: str | None = None) -> ReplyV1:
        cmd = EditApprovalV1(pending_id=record["pending_id"], arguments=arguments, actor=who,
                             fingerprint=record["fingerprint"] if fingerprint is None else fingerprint)
        return await self.send(subjects.APPROVAL_CMD_EDIT, cmd)

    async def get(self, pending_id: str, who: Actor) -> ReplyV1:
        return await self.send(subjects.APPROVAL_QUERY_GET, GetApprovalV1(pending_id=pending_id, actor=who),
                               durable=False)


@pytest.fixture
def approvals(broker, fake_erp) -> Approvals:
    return Approvals(broker, fake_erp)


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


@pytest.fixture(scope="module")
async def fake_erp(nats_url):
    """Answers ``cmd.erp.prepare`` of edits like the ERP (a preview, or ``draft_changed`` for draft "D-GONE") and
    sends the edited version's ``cmd.approval.request`` through JetStream, as the ERP's outbox relay would."""
    broker = create_broker(nats_url, "fake-erp")
    bus = ServiceBus(broker, "erp")
    ledger = FakeLedger()

    @bus.command(subjects.ERP_CMD_PREPARE, PrepareOperationV1)
    async def prepare(cmd: PrepareOperationV1) -> ReplyV1:
        ledger.seen.append(cmd)
        if cmd.arguments.get("draft_id") == "D-GONE":
            return ReplyV1.failure("draft_changed", "the draft has a newer revision", 409)
        preview = PreviewV1(operation="Submit order", object=f"Draft {cmd.arguments.get('draft_id')}",
                            target="Customer", amount_minor=100 * cmd.arguments.get("revision", 1), currency="EUR")
        superseded = ledger.operations[cmd.supersedes]  # its own record: requester and assertion come from it
        request_cmd = RequestApprovalV1(
            call_id=cmd.call_id, session_id=cmd.session_id, tool=cmd.tool, arguments=cmd.arguments,
            fingerprint=cmd.fingerprint, operation_id=cmd.operation_id,
            preview=preview,
            requested_by=superseded.requested_by, assertion=superseded.assertion,
            asserted_at=superseded.asserted_at, prepared_at=datetime.now(UTC), supersedes=cmd.supersedes)
        request_cmd = signed(request_cmd)
        ledger.record(request_cmd)
        await broker.publish(request_cmd.model_dump_json().encode(), subjects.APPROVAL_CMD_REQUEST,
                             headers={"Nats-Msg-Id": f"approval.request.{cmd.operation_id}"},
                             stream=COMMANDS_STREAM.name)
        return ReplyV1.success(PreparedOperationV1(operation_id=cmd.operation_id, tool=cmd.tool,
                                                   fingerprint=cmd.fingerprint, preview=preview))

    await broker.start()
    yield ledger
    await broker.stop()
