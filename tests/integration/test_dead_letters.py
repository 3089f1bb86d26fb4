"""A command whose handler keeps failing transiently is dead-lettered after its attempts, and
`erpilot dlq` lists, shows and replays it exactly once (real NATS; the service is a ServiceBus
registered here, the CLI runs as a process)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from erpilot.dlq import record_subject
from erpilot_contracts.base import Message
from erpilot_contracts.subjects import COMMANDS_STREAM, DEAD_LETTER_STREAM, dead_letter_subject
from erpilot_platform.broker import TransientError, create_broker, request
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
async def flaky(nats_url, broker):
    """A service 'testsvc' whose command fails transiently while ``state["down"]``; counts attempts."""
    subject = f"erpilot.v1.cmd.testsvc.flaky_{secrets.token_hex(4)}"
    state: dict[str, Any] = {"down": True, "attempts": [], "handled": []}
    service_broker = create_broker(nats_url, "testsvc")
    bus = ServiceBus(service_broker, "testsvc", RetryPolicy(max_attempts=3, max_age_seconds=3600))

    @bus.command(subject, FlakyV1)
    async def handle(cmd: FlakyV1) -> dict:
        state["attempts"].append(cmd.n)
        if state["down"]:
            raise TransientError("the downstream is away")
        state["handled"].append(cmd.n)
        return {"ok": True, "data": {"n": cmd.n}}

    await service_broker.start()
    js = broker.config.connection_state.stream
    try:
        yield subject, state, js
    finally:
        await service_broker.stop()
        with contextlib.suppress(Exception):
            await js.delete_consumer(COMMANDS_STREAM.name, bus._durable_name(subject))


async def test_a_command_that_keeps_failing_is_dead_lettered_after_its_attempts_and_replayed_once(
        nats_url, broker, flaky):
    subject, state, js = flaky

    reply = await request(broker, subject, FlakyV1(n=7), durable=True, timeout=60)

    # three attempts, then an answer that says so, and the message in the dead-letter stream
    assert state["attempts"] == [7, 7, 7] and state["handled"] == []
    assert not reply.ok and reply.error.code == "service_unavailable" and reply.error.status == 503
    assert "gave up after 3 attempts" in reply.error.message
    dead = await js.get_last_msg(DEAD_LETTER_STREAM.name, dead_letter_subject("testsvc", subject))
    assert dead.headers["Erpilot-Attempts"] == "3" and dead.headers["Erpilot-Original-Subject"] == subject
    assert "TransientError('the downstream is away')" in dead.headers["Erpilot-Reason"]
    assert json.loads(dead.data)["n"] == 7

    # the operator sees it ...
    listed = dlq(nats_url, "list", "--service", "testsvc", "--json")
    assert listed.returncode == 0, listed.stderr
    [letter] = [d for d in json.loads(listed.stdout) if d["seq"] == dead.seq]
    assert letter["original_subject"] == subject and letter["attempts"] == 3 and letter["replayed"] is None
    assert letter["service"] == "testsvc" and letter["original"].startswith(f"{COMMANDS_STREAM.name}:")
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
    listed = json.loads(dlq(nats_url, "list", "--service", "testsvc", "--json").stdout)
    [letter] = [d for d in listed if d["seq"] == dead.seq]
    assert letter["replayed"]["dead_letter_seq"] == dead.seq and letter["replayed"]["subject"] == subject


def test_showing_or_replaying_what_is_not_a_dead_letter_is_a_clear_error(nats_url, broker):
    missing = dlq(nats_url, "show", "999999999")
    assert missing.returncode == 1 and "no dead letter 999999999" in missing.stderr
    assert dlq(nats_url, "replay", "999999999").returncode == 1


async def test_a_replay_that_died_after_its_claim_is_completed_by_the_next_one(nats_url, broker, flaky):
    subject, state, js = flaky
    await request(broker, subject, FlakyV1(n=8), durable=True, timeout=60)
    dead = await js.get_last_msg(DEAD_LETTER_STREAM.name, dead_letter_subject("testsvc", subject))
    original = f"{dead.headers['Erpilot-Original-Stream']}:{dead.headers['Erpilot-Original-Seq']}"
    # an operator's replay claimed it, then died before publishing
    claim = {"dead_letter_seq": dead.seq, "replayed_at": datetime.now(UTC).isoformat()}
    await js.publish(record_subject("testsvc", original), json.dumps(claim).encode(),
                     stream=DEAD_LETTER_STREAM.name, headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    state["down"] = False

    assert "replayed to" in dlq(nats_url, "replay", str(dead.seq)).stdout
    await until(lambda: state["handled"] == [8])
    published = await js.get_last_msg(COMMANDS_STREAM.name, subject)
    assert "already replayed" in dlq(nats_url, "replay", str(dead.seq)).stdout
    assert (await js.get_last_msg(COMMANDS_STREAM.name, subject)).seq == published.seq
