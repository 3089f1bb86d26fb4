"""A command whose handler keeps failing transiently is dead-lettered after its attempts, and
`erpilot dlq` lists, shows and replays it exactly once (real NATS; the service is a ServiceBus
registered here, the CLI runs as a process). A dead letter is replayed only to a subject the service
owning its namespace consumes, and, where others consume that subject too, only as a faithful copy of
its original: a forged one is refused and nothing is published or recorded.

The replays go to real services' subjects, which the services other tests run consume on the shared
server, so each test here has a NATS server of its own (streams only, no consumers but its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import nats.js.errors
import pytest
from faststream.nats import NatsBroker

from erpilot.ops.dlq import record_subject
from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.subjects import (
    AGENT_CMD_POST_MESSAGE,
    APPROVAL_CMD_DECIDE_MANY,
    APPROVAL_EVT_EXPIRING,
    APPROVAL_EVT_RESOLVED,
    COMMANDS_STREAM,
    DEAD_LETTER_STREAM,
    ERP_CMD_UPDATE_PRODUCT,
    EVENTS_STREAM,
    dead_letter_subject,
)
from erpilot_platform import jetstream
from erpilot_platform.broker import TransientError, create_broker, request
from erpilot_platform.embedded import EmbeddedNats
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.retries import RetryPolicy

pytestmark = pytest.mark.integration


class FlakyV1(Message):
    n: int


async def until(condition, timeout: float = 60.0) -> None:
    """Wait (without blocking the service running in this loop) until ``condition()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def dlq(nats_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ERPILOT_NATS_URL": nats_url}
    env.pop("ERPILOT_NATS_USER", None)
    return subprocess.run([sys.executable, "-m", "erpilot", "dlq", *args], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def own_nats_url(tmp_path):
    server = EmbeddedNats(tmp_path / "nats")
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
async def own_broker(own_nats_url):
    client = NatsBroker(own_nats_url, max_reconnect_attempts=-1)
    await client.connect()
    await jetstream.migrate(client.config.connection_state.stream, [])  # the streams, no consumer
    yield client
    await client.stop()


@pytest.fixture
async def flaky(own_nats_url, own_broker):
    """The ERP's ``cmd.erp.update_product`` handled by a ServiceBus of service ``erp`` that fails
    transiently while ``state["down"]``; counts attempts."""
    subject = ERP_CMD_UPDATE_PRODUCT
    state: dict[str, Any] = {"down": True, "attempts": [], "handled": []}
    service_broker = create_broker(own_nats_url, "erp")
    bus = ServiceBus(service_broker, "erp", RetryPolicy(max_attempts=3, max_age_seconds=3600))

    @bus.command(subject, FlakyV1)
    async def handle(cmd: FlakyV1) -> ReplyV1:  # a handler answers a model (the ServiceBus refuses a bare dict)
        state["attempts"].append(cmd.n)
        if state["down"]:
            raise TransientError("the downstream is away")
        state["handled"].append(cmd.n)
        return ReplyV1(ok=True, data={"n": cmd.n})

    await service_broker.start()
    try:
        yield subject, state, own_broker.config.connection_state.stream
    finally:
        await service_broker.stop()


async def test_a_command_that_keeps_failing_is_dead_lettered_after_its_attempts_and_replayed_once(
        own_nats_url, own_broker, flaky):
    subject, state, js = flaky
    nats_url, broker = own_nats_url, own_broker

    reply = await request(broker, subject, FlakyV1(n=7), durable=True, timeout=60)

    # three attempts, then an answer that says so, and the message in the dead-letter stream
    assert state["attempts"] == [7, 7, 7] and state["handled"] == []
    assert not reply.ok and reply.error.code == "service_unavailable" and reply.error.status == 503
    assert "gave up after 3 attempts" in reply.error.message
    dead = await js.get_last_msg(DEAD_LETTER_STREAM.name, dead_letter_subject("erp", subject))
    assert dead.headers["Erpilot-Attempts"] == "3" and dead.headers["Erpilot-Original-Subject"] == subject
    assert "TransientError('the downstream is away')" in dead.headers["Erpilot-Reason"]
    assert json.loads(dead.data)["n"] == 7

    # the operator sees it ...
    listed = dlq(nats_url, "list", "--service", "erp", "--json")
    assert listed.returncode == 0, listed.stderr
    [letter] = [d for d in json.loads(listed.stdout) if d["seq"] == dead.seq]
    assert letter["original_subject"] == subject and letter["attempts"] == 3 and letter["replayed"] is None
    assert letter["service"] == "erp" and letter["original"].startswith(f"{COMMANDS_STREAM.name}:")
    shown = dlq(nats_url, "show", str(dead.seq))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["body"]["n"] == 7
    assert str(dead.seq) in dlq(nats_url, "list").stdout

    # ... and, the downstream back, replays it: the command is handled once
    state["down"] = False
    before = (await js.stream_info(COMMANDS_STREAM.name)).state.last_seq
    first = dlq(nats_url, "replay", str(dead.seq))
    assert first.returncode == 0, first.stderr
    assert f"{dead.seq}: replayed to {subject}" in first.stdout
    await until(lambda: state["handled"] == [7])
    replayed = await js.get_last_msg(COMMANDS_STREAM.name, subject)
    assert replayed.seq > before and json.loads(replayed.data)["n"] == 7
    assert replayed.headers["Erpilot-Replay-Of"] == letter["original"] and "reply_to" not in replayed.headers

    # replaying again (or racing another operator) publishes nothing
    second = dlq(nats_url, "replay", str(dead.seq))
    assert second.returncode == 0, second.stderr
    assert "already replayed, nothing published" in second.stdout
    assert (await js.get_last_msg(COMMANDS_STREAM.name, subject)).seq == replayed.seq
    listed = json.loads(dlq(nats_url, "list", "--service", "erp", "--json").stdout)
    [letter] = [d for d in listed if d["seq"] == dead.seq]
    assert letter["replayed"]["dead_letter_seq"] == dead.seq and letter["replayed"]["subject"] == subject


def test_showing_or_replaying_what_is_not_a_dead_letter_is_a_clear_error(nats_url, broker):
    missing = dlq(nats_url, "show", "999999999")
    assert missing.returncode == 1 and "no dead letter 999999999" in missing.stderr
    assert dlq(nats_url, "replay", "999999999").returncode == 1


async def test_a_replay_that_died_after_its_claim_is_completed_by_the_next_one(own_nats_url, own_broker, flaky):
    subject, state, js = flaky
    nats_url, broker = own_nats_url, own_broker
    await request(broker, subject, FlakyV1(n=8), durable=True, timeout=60)
    dead = await js.get_last_msg(DEAD_LETTER_STREAM.name, dead_letter_subject("erp", subject))
    original = f"{dead.headers['Erpilot-Original-Stream']}:{dead.headers['Erpilot-Original-Seq']}"
    # an operator's replay claimed it, then died before publishing
    claim = {"dead_letter_seq": dead.seq, "replayed_at": datetime.now(UTC).isoformat()}
    await js.publish(record_subject("erp", original), json.dumps(claim).encode(),
                     stream=DEAD_LETTER_STREAM.name, headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    state["down"] = False

    assert "replayed to" in dlq(nats_url, "replay", str(dead.seq)).stdout
    await until(lambda: state["handled"] == [8])
    published = await js.get_last_msg(COMMANDS_STREAM.name, subject)
    assert "already replayed" in dlq(nats_url, "replay", str(dead.seq)).stdout
    assert (await js.get_last_msg(COMMANDS_STREAM.name, subject)).seq == published.seq


async def forge(js, service: str, subject: str, body: bytes, original: str) -> int:
    """A dead letter as a service could write it into its own namespace, naming any subject."""
    stream, seq = original.split(":")
    headers = {"Erpilot-Original-Subject": subject, "Erpilot-Original-Stream": stream, "Erpilot-Original-Seq": seq,
               "Erpilot-Reason": "invalid message: forged", "Erpilot-Attempts": "1"}
    ack = await js.publish(dead_letter_subject(service, subject), body, stream=DEAD_LETTER_STREAM.name,
                           headers=headers)
    return ack.seq


async def nothing_on(js, stream: str, subject: str) -> bool:
    try:
        await js.get_last_msg(stream, subject)
    except nats.js.errors.NotFoundError:
        return True
    return False


async def test_a_forged_dead_letter_naming_a_subject_its_service_does_not_consume_is_refused(
        own_nats_url, own_broker):
    js = own_broker.config.connection_state.stream
    decision = json.dumps({"pending_id": "pa_1", "action": "approve", "fingerprint": "sha256:x"}).encode()
    forged = await forge(js, "agent", APPROVAL_CMD_DECIDE_MANY, decision, f"{COMMANDS_STREAM.name}:1")
    honest = await forge(js, "agent", AGENT_CMD_POST_MESSAGE, b"{}", f"{COMMANDS_STREAM.name}:2")

    refused = dlq(own_nats_url, "replay", str(honest), str(forged))  # one refused: none published
    assert refused.returncode == 1
    assert f"dead letter {forged} refused, nothing published" in refused.stderr
    assert f"names {APPROVAL_CMD_DECIDE_MANY}, which agent does not consume" in refused.stderr
    assert await nothing_on(js, COMMANDS_STREAM.name, APPROVAL_CMD_DECIDE_MANY)
    assert await nothing_on(js, COMMANDS_STREAM.name, AGENT_CMD_POST_MESSAGE)
    for original in (f"{COMMANDS_STREAM.name}:1", f"{COMMANDS_STREAM.name}:2"):  # no claim was recorded either
        assert await nothing_on(js, DEAD_LETTER_STREAM.name, record_subject("agent", original))
    assert "not replayed" in dlq(own_nats_url, "list", "--service", "agent").stdout

    namespace = await js.publish(f"erpilot.v1.dlq.testsvc.{AGENT_CMD_POST_MESSAGE.removeprefix('erpilot.v1.')}", b"{}",
                                 stream=DEAD_LETTER_STREAM.name,
                                 headers={"Erpilot-Original-Subject": AGENT_CMD_POST_MESSAGE})
    unknown = dlq(own_nats_url, "replay", str(namespace.seq))
    assert unknown.returncode == 1 and "which is no Erpilot service" in unknown.stderr
    assert await nothing_on(js, COMMANDS_STREAM.name, AGENT_CMD_POST_MESSAGE)

    assert dlq(own_nats_url, "replay", str(honest)).returncode == 0  # alone, the agent's own subject goes
    assert not await nothing_on(js, COMMANDS_STREAM.name, AGENT_CMD_POST_MESSAGE)


class ExpiringV1(Message):
    pending_id: str


async def test_an_event_others_consume_too_is_replayed_only_as_a_faithful_copy_of_its_original(
        own_nats_url, own_broker):
    """The agent and the approval service both consume ``evt.approval.*``: the agent could otherwise put
    words in the approval service's mouth through a replay."""
    js = own_broker.config.connection_state.stream
    agent_broker = create_broker(own_nats_url, "agent")
    bus = ServiceBus(agent_broker, "agent", RetryPolicy(max_attempts=3, max_age_seconds=3600))
    handled: list[str] = []

    @bus.event(APPROVAL_EVT_EXPIRING, ExpiringV1)
    async def on_expiring(event: ExpiringV1) -> None:
        handled.append(event.pending_id)

    await agent_broker.start()
    try:
        published = await js.publish(APPROVAL_EVT_EXPIRING, b'{"not": "an event"}', stream=EVENTS_STREAM.name)
        genuine = None
        for _ in range(600):  # the agent's consumer dead-letters it (it does not parse)
            with contextlib.suppress(nats.js.errors.NotFoundError):
                genuine = await js.get_last_msg(DEAD_LETTER_STREAM.name,
                                                dead_letter_subject("agent", APPROVAL_EVT_EXPIRING))
                break
            await asyncio.sleep(0.05)
        assert genuine is not None and genuine.headers["Erpilot-Original-Seq"] == str(published.seq)

        forged = await forge(js, "agent", APPROVAL_EVT_RESOLVED, b'{"pending_id": "pa_1", "status": "approved"}',
                             f"{EVENTS_STREAM.name}:{published.seq}")
        refused = dlq(own_nats_url, "replay", str(forged))
        assert refused.returncode == 1 and "is consumed by approval too" in refused.stderr
        assert await nothing_on(js, EVENTS_STREAM.name, APPROVAL_EVT_RESOLVED)

        replayed = dlq(own_nats_url, "replay", str(genuine.seq))  # the service's own dead letter: a faithful copy
        assert replayed.returncode == 0 and f"replayed to {APPROVAL_EVT_EXPIRING}" in replayed.stdout, replayed.stderr
        assert (await js.get_last_msg(EVENTS_STREAM.name, APPROVAL_EVT_EXPIRING)).seq > published.seq
    finally:
        await agent_broker.stop()
