"""Least-privilege NATS (SPEC §8: "the agent and the model cannot produce a decision (NATS subject
permissions in the deployed configuration enforce it too)").

A NATS server of this module alone runs the configuration `erpilot up --secure` and the deployment
use (src/erpilot/stack/nats_security.py); every service connects with its own user. The agent's
credentials are refused when they try to send a decision, ask for an approval, send a commit, publish an
approval event, change or delete a stream, or use another service's consumer; the whole approve flow still
works, and no service hits a single permission violation on the way.
"""

from __future__ import annotations

import asyncio
import re
import socket
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.js.api import ConsumerConfig, StreamConfig

from erpilot.stack import db_roles, nats_config, nats_credentials, nats_security
from erpilot.stack.nats_security import ADMIN, JS_DOMAIN, durable_name
from erpilot.stack.stack import Stack, free_port, merge_envs, migrate_all, seed
from erpilot_contracts import subjects
from erpilot_contracts.subjects import COMMANDS_STREAM, EVENTS_STREAM
from erpilot_platform.embedded import EmbeddedNats
from erpilot_platform.jetstream import ACK_WAIT_SECONDS
from erpilot_platform.testing.backends import scratch_database
from tests.e2e.conftest import DB_PASSWORDS, SECRET, Api
from tests.e2e.test_write_flow import call_events, decide, draft, finished, request_write

pytestmark = pytest.mark.e2e

# Each user's own inbox prefix, where replies to its requests arrive (the deployment's contract).
INBOXES = {"gateway": "_INBOX.gateway", "agent": "_INBOX.agent", "approval": "_INBOX.approval", "erp": "_INBOX.erp",
           "admin": "_INBOX"}
PROBE = "permission-probe"  # the connection name of this test's own clients, told apart in the server log
VIOLATION = re.compile(r'"(?P<client>[^"]*)" - "\$G/user:(?P<user>[^"]+)" - (?P<kind>Publish|Subscription) '
                       r'Violation - Subject "(?P<subject>[^"]+)"')


@dataclass
class Secure:
    server: EmbeddedNats
    passwords: dict[str, str]
    stack: Stack


@pytest.fixture(scope="module")
def secure(database_url, tmp_path_factory) -> Iterator[Secure]:
    """A stack on its own NATS server with the deployed permissions, and its own database."""
    data_dir = tmp_path_factory.mktemp("secure-stack")
    passwords = nats_credentials.load_or_create_passwords(data_dir)
    server = EmbeddedNats(data_dir / "nats-home", jetstream_domain=JS_DOMAIN,
                          extra_config=nats_config.render(passwords=passwords))
    stack = None
    with scratch_database(database_url, "erpilot_sec") as url:
        try:
            server.start()
            # Operations declare streams and consumers (as `erpilot migrate` does); the services only read them.
            how, _ = asyncio.run(nats_credentials.migrate_jetstream(server.url, user=ADMIN,
                                                                    password=passwords[ADMIN]))
            assert how == f"domain {JS_DOMAIN}"
            migrate_all(url)
            db_roles.provision(url, DB_PASSWORDS)
            seed(url)
            stack = Stack(server.url, url, data_dir, http_port=free_port(), env={"ERPILOT_AUTH_SECRET": SECRET},
                          service_envs=merge_envs(nats_credentials.service_credentials(passwords),
                                                  db_roles.role_envs(url, DB_PASSWORDS)),
                          nats_admin=(ADMIN, passwords[ADMIN]))
            stack.start()
            stack.wait_ready()
            yield Secure(server, passwords, stack)
        finally:
            if stack is not None:
                stack.stop()
            server.stop()


async def connect(server: EmbeddedNats, user: str, password: str, errors: list[str]) -> nats.NATS:
    async def on_error(exc: Exception) -> None:
        errors.append(str(exc).lower())

    return await nats.connect(server.url, user=user, password=password, name=PROBE, error_cb=on_error,
                              max_reconnect_attempts=0,
                              inbox_prefix=INBOXES[user])


async def refused(errors: list[str], what: str, subject: str) -> bool:
    """Whether the server reported a permissions violation for ``what`` ("publish to"/"subscription to")."""
    needle = f'permissions violation for {what} "{subject.lower()}"'
    deadline = time.monotonic() + 15  # the -ERR precedes flush()'s PONG; the callback may run a little later
    while time.monotonic() < deadline:
        if any(needle in error for error in errors):
            return True
        await asyncio.sleep(0.05)
    return False


def violations(server: EmbeddedNats) -> list[dict]:
    return [m.groupdict() for m in VIOLATION.finditer(server.log_path.read_text(errors="replace"))]


def test_the_secrets_are_private(secure):
    for path in (secure.stack.data_dir / nats_credentials.PASSWORDS_FILE, secure.server.data_dir / "nats.conf"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_the_approve_flow_works_with_every_service_on_least_privilege(secure):
    requester = Api(secure.stack.base_url, f"req-{time.monotonic_ns()}", "requester")
    approver = Api(secure.stack.base_url, f"appr-{time.monotonic_ns()}", "approver")
    session_id = requester.new_session()
    revision = draft(requester, session_id, [("SKU-PAPER-A3", 1)])

    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    response = decide(approver, pending, "approve")

    assert response.status_code == 200, response.text
    view = finished(requester, session_id, pending["call_id"])
    assert view["outcome"] == "succeeded" and view["result"]["status"] == "placed"
    types = [e["type"] for e in call_events(requester, session_id, pending["call_id"])]  # SSE: gateway's consumer
    assert types == ["tool_started", "approval_pending", "approval_resolved", "tool_executing", "tool_finished"]

    # An edit (gateway → approval → ERP prepare) and the remaining reads and back-office paths.
    order = view["result"]
    cancel = request_write(requester, session_id, "cancel_order", {"order_id": order["order_id"], "reason": "dup"})
    edited = approver.post(f"/v1/approvals/{cancel['pending_id']}/edit", {
        "fingerprint": cancel["fingerprint"], "arguments": {"order_id": order["order_id"], "reason": "duplicate"}})
    assert edited.status_code == 201, edited.text
    second = Api(secure.stack.base_url, f"appr2-{time.monotonic_ns()}", "approver")  # the editor is a party
    assert decide(second, edited.json(), "approve").status_code == 200
    assert finished(requester, session_id, cancel["call_id"])["result"]["status"] == "cancelled"
    # An order read by an approver of an approval naming it: the gateway asks the agent who owns the session and
    # the approval service whether this person may decide such an approval (query.approval.referring).
    assert second.get(f"/v1/erp/orders/{order['order_id']}").status_code == 200
    admin = Api(secure.stack.base_url, f"admin-{time.monotonic_ns()}", "admin", "requester")
    assert requester.call(session_id, "get_product", {"sku": "SKU-PAPER-A3"}).json()["outcome"] == "succeeded"
    assert admin.get(f"/v1/operations/{edited.json()['operation_id']}").json()["status"] == "committed"
    assert admin.client.patch("/v1/erp/products/SKU-PAPER-A3", json={"status": "active"}).status_code == 200
    assert approver.get("/v1/approvals").status_code == 200 and requester.get("/v1/tools").status_code == 200

    services = [v for v in violations(secure.server) if PROBE not in v["client"]]
    assert services == [], "a service needs a permission it was not given"


async def test_the_agent_cannot_send_a_decision_an_approval_request_a_commit_or_an_approval_event(secure):
    """The agent runs the model: it may not decide, nor ask for an approval itself (the request is the ledger's,
    built from its record, so the agent cannot choose what a person sees or who asked), nor start a commit."""
    server, passwords = secure.server, secure.passwords
    errors: list[str] = []
    agent = await connect(server, "agent", passwords["agent"], errors)
    admin = await connect(server, ADMIN, passwords[ADMIN], [])
    marker = f"forged-{uuid.uuid4().hex}".encode()
    try:
        js = agent.jetstream(timeout=1.5)
        for subject, stream in ((subjects.APPROVAL_REQ_DECIDE, COMMANDS_STREAM.name),
                                (subjects.APPROVAL_CMD_EDIT, COMMANDS_STREAM.name),
                                (subjects.APPROVAL_CMD_DECIDE_MANY, COMMANDS_STREAM.name),
                                (subjects.APPROVAL_CMD_REQUEST, COMMANDS_STREAM.name),
                                (subjects.ERP_CMD_COMMIT, COMMANDS_STREAM.name),
                                (subjects.APPROVAL_EVT_RESOLVED, EVENTS_STREAM.name),
                                (subjects.APPROVAL_EVT_REQUESTED, EVENTS_STREAM.name)):
            with pytest.raises(nats.errors.TimeoutError):  # no PubAck: the server dropped it
                await js.publish(subject, marker, stream=stream)
            await agent.publish(subject, marker)  # core NATS: refused just the same
            await agent.flush()
            assert await refused(errors, "publish to", subject), errors
            try:
                last = await admin.jetstream().get_last_msg(stream, subject)
                assert marker not in last.data
            except nats.js.errors.NotFoundError:
                pass
    finally:
        await agent.close()
        await admin.close()


async def test_the_agent_cannot_answer_the_gateways_request_for_a_decision(secure):
    """Issue 32: the agent sees the reply inboxes of the gateway's requests to it, and nats-py's inboxes are
    sequential; a forged "409 expired" in the inbox of a decision reached an approver whose decision was
    committed. Now the agent may answer into the gateway's inboxes for the agent alone: its publish into the
    inbox of a real decision is refused by the server."""
    requester = Api(secure.stack.base_url, f"req-{time.monotonic_ns()}", "requester")
    approver = Api(secure.stack.base_url, f"appr-{time.monotonic_ns()}", "approver")
    session_id = requester.new_session()
    revision = draft(requester, session_id, [("SKU-PAPER-A3", 1)])
    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    # Decided in bulk: a single decision is a core request (issue 31), which no stream keeps to show its inbox.
    bulk = approver.post("/v1/approvals/decisions", {"action": "approve", "items": [
        {"pending_id": pending["pending_id"], "fingerprint": pending["fingerprint"]}]})
    assert bulk.status_code == 200, bulk.text
    assert requester.post(f"/v1/sessions/{session_id}/messages", {"text": "hello"}).status_code == 202
    server, passwords = secure.server, secure.passwords
    admin = await connect(server, ADMIN, passwords[ADMIN], [])
    try:  # the inboxes the gateway really used, as the commands stream stored them
        decision = await admin.jetstream().get_last_msg(COMMANDS_STREAM.name, subjects.APPROVAL_CMD_DECIDE_MANY)
        message = await admin.jetstream().get_last_msg(COMMANDS_STREAM.name, subjects.AGENT_CMD_POST_MESSAGE)
    finally:
        await admin.close()
    decision_inbox, agents_inbox = decision.headers["reply_to"], message.headers["reply_to"]
    assert decision_inbox.startswith("_INBOX.gateway.") and agents_inbox.startswith("_INBOX.gateway_from_agent.")

    errors: list[str] = []
    agent = await connect(server, "agent", passwords["agent"], errors)
    try:
        forged = b'{"ok": false, "error": {"code": "expired", "message": "forged", "status": 409}}'
        for inbox in (decision_inbox, decision_inbox.rsplit(".", 1)[0] + ".NEXT"):  # that one, or a guessed one
            await agent.publish(inbox, forged)
            await agent.flush()
            assert await refused(errors, "publish to", inbox), errors
        await agent.publish(agents_inbox, b"{}")  # the agent still answers the gateway's requests to it
        await agent.flush()
        await asyncio.sleep(0.5)
        assert not any(agents_inbox.lower() in error for error in errors), errors
    finally:
        await agent.close()


def test_nats_monitoring_listens_on_loopback_only(secure):
    """Issue 32: monitoring lists every live inbox; `erpilot up --secure` binds it to loopback (as `-a 127.0.0.1`
    does every port of the embedded server), never to an address other hosts reach."""
    assert secure.server.monitor_url is not None and secure.server.monitor_url.startswith("http://127.0.0.1:")
    port = int(secure.server.monitor_url.rsplit(":", 1)[1])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:  # this host's address on its default route (no packet is sent), if it has one
            probe.connect(("192.0.2.1", 9))
            outward = probe.getsockname()[0]
        except OSError:
            outward = None
    if outward and not outward.startswith("127."):
        with pytest.raises(OSError):
            socket.create_connection((outward, port), timeout=2).close()


async def test_the_agent_cannot_change_streams_or_use_other_services_consumers(secure):
    server, passwords = secure.server, secure.passwords
    errors: list[str] = []
    agent = await connect(server, "agent", passwords["agent"], errors)
    admin = await connect(server, ADMIN, passwords[ADMIN], [])
    try:
        js = agent.jetstream(timeout=1.5)
        before = (await admin.jetstream().stream_info(COMMANDS_STREAM.name)).config

        with pytest.raises(nats.errors.TimeoutError):
            await js.delete_stream(COMMANDS_STREAM.name)
        assert await refused(errors, "publish to", f"$JS.API.STREAM.DELETE.{COMMANDS_STREAM.name}")
        # An update could add sources with subject transforms (forging commands through another
        # stream) or shorten retention: refused outright.
        with pytest.raises(nats.errors.TimeoutError):
            await js.update_stream(StreamConfig(name=COMMANDS_STREAM.name, subjects=list(COMMANDS_STREAM.subjects),
                                                max_age=1.0))
        after = (await admin.jetstream().stream_info(COMMANDS_STREAM.name)).config
        assert (after.max_age, after.subjects, after.sources) == (before.max_age, before.subjects, before.sources)

        decide_consumer = durable_name("approval", subjects.APPROVAL_CMD_DECIDE_MANY)
        for api in (f"$JS.API.CONSUMER.INFO.{COMMANDS_STREAM.name}.{decide_consumer}",
                    f"$JS.API.CONSUMER.MSG.NEXT.{COMMANDS_STREAM.name}.{decide_consumer}",
                    # its own consumer's name with the decisions as filter
                    f"$JS.API.CONSUMER.CREATE.{COMMANDS_STREAM.name}."
                    f"{durable_name('agent', subjects.AGENT_CMD_POST_MESSAGE)}.{subjects.APPROVAL_REQ_DECIDE}"):
            with pytest.raises(nats.errors.TimeoutError):
                await agent.request(api, b"{}", timeout=1.0)
            assert await refused(errors, "publish to", api), errors

        await agent.subscribe("erpilot.v1.query.approval.>", queue="approval")  # answer approval's queries
        await agent.flush()
        assert await refused(errors, "subscription to", "erpilot.v1.query.approval.>"), errors
    finally:
        await agent.close()
        await admin.close()


@pytest.mark.parametrize("service", nats_security.SERVICES)
async def test_no_service_can_create_or_delete_a_stream_or_a_durable_consumer(secure, service):
    """Streams and durable consumers are `erpilot migrate`'s: every service only reads them."""
    server, passwords = secure.server, secure.passwords
    errors: list[str] = []
    client = await connect(server, service, passwords[service], errors)
    admin = await connect(server, ADMIN, passwords[ADMIN], [])
    try:
        js = client.jetstream(timeout=1.5)
        with pytest.raises(nats.errors.TimeoutError):
            await js.add_stream(StreamConfig(name="ERPILOT_ROGUE", subjects=["rogue.>"]))
        assert await refused(errors, "publish to", "$JS.API.STREAM.CREATE.ERPILOT_ROGUE"), errors
        with pytest.raises(nats.errors.TimeoutError):
            await js.delete_stream(EVENTS_STREAM.name)
        assert await refused(errors, "publish to", f"$JS.API.STREAM.DELETE.{EVENTS_STREAM.name}"), errors
        for consumer in nats_security.consumers(service)[:1]:  # not even its own durable consumer
            with pytest.raises(nats.errors.TimeoutError):
                await js.add_consumer(consumer.stream, ConsumerConfig(
                    name=consumer.durable, durable_name=consumer.durable, filter_subject=consumer.subject,
                    ack_wait=1.0))
            assert await refused(errors, "publish to", f"$JS.API.CONSUMER.CREATE.{consumer.stream}."
                                                       f"{consumer.durable}.{consumer.subject}"), errors
            with pytest.raises(nats.errors.TimeoutError):
                await js.delete_consumer(consumer.stream, consumer.durable)
            info = await admin.jetstream().consumer_info(consumer.stream, consumer.durable)
            assert info.config.ack_wait == ACK_WAIT_SECONDS
        with pytest.raises(nats.js.errors.NotFoundError):
            await admin.jetstream().stream_info("ERPILOT_ROGUE")
        assert (await admin.jetstream().stream_info(EVENTS_STREAM.name)).config.name == EVENTS_STREAM.name
    finally:
        await client.close()
        await admin.close()


# What each service's credentials must NOT do, written out here (not derived from nats_security.py):
# publishing what only another service may publish, reading another service's inbox or work, and
# changing a stream. Every one must come back from the server as a permissions violation.
SESSION_EVENTS = "erpilot.v1.sessions.ses_probe.events"
DELETE_STREAM = "$JS.API.STREAM.DELETE.ERPILOT_COMMANDS"
REFUSED = {
    "gateway": {
        "publish to": ("erpilot.v1.cmd.erp.commit", "erpilot.v1.cmd.erp.prepare", "erpilot.v1.cmd.approval.request",
                       "erpilot.v1.evt.approval.resolved", "erpilot.v1.evt.erp.operation_finished", SESSION_EVENTS,
                       DELETE_STREAM),
        "subscription to": ("_INBOX.agent.>", "_INBOX.>", "erpilot.v1.req.approval.decide",
                            "erpilot.v1.req.agent.tool_call"),
    },
    "agent": {
        "publish to": ("erpilot.v1.req.approval.decide", "erpilot.v1.cmd.approval.edit",
                       "erpilot.v1.cmd.approval.request", "erpilot.v1.cmd.erp.commit",
                       "erpilot.v1.evt.approval.resolved", "erpilot.v1.evt.approval.requested",
                       "erpilot.v1.evt.erp.operation_finished", "erpilot.v1.cmd.erp.update_product", DELETE_STREAM),
        "subscription to": ("_INBOX.approval.>", "_INBOX.erp.>", "_INBOX.>", "erpilot.v1.query.approval.>"),
    },
    "approval": {
        "publish to": ("erpilot.v1.cmd.approval.request", "erpilot.v1.req.erp.draft", "erpilot.v1.req.agent.tool_call",
                       "erpilot.v1.evt.erp.operation_finished", SESSION_EVENTS, DELETE_STREAM),
        "subscription to": ("_INBOX.erp.>", "_INBOX.agent.>", "erpilot.v1.query.erp.>",
                            "erpilot.v1.sessions.*.events"),
    },
    "erp": {
        "publish to": ("erpilot.v1.req.approval.decide", "erpilot.v1.cmd.erp.commit",
                       "erpilot.v1.req.agent.tool_call", "erpilot.v1.evt.approval.resolved", SESSION_EVENTS,
                       DELETE_STREAM),
        "subscription to": ("_INBOX.agent.>", "_INBOX.approval.>", "erpilot.v1.cmd.approval.>"),
    },
}


@pytest.mark.parametrize("user", sorted(REFUSED))
async def test_every_service_is_refused_what_is_not_its_own(secure, user):
    errors: list[str] = []
    client = await connect(secure.server, user, secure.passwords[user], errors)
    missing = []
    try:
        for subject in REFUSED[user]["publish to"]:
            await client.publish(subject, b"probe")
            await client.flush()
            if not await refused(errors, "publish to", subject):
                missing.append(f"publish to {subject}")
        for subject in REFUSED[user]["subscription to"]:
            await client.subscribe(subject)
            await client.flush()
            if not await refused(errors, "subscription to", subject):
                missing.append(f"subscription to {subject}")
    finally:
        await client.close()
    assert missing == [], f"{user} was not refused: {missing}; server said: {errors}"
