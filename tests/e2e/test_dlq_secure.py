"""`erpilot dlq` on the deployed least-privilege NATS users: it reads as `admin` and replays each
step as the user allowed to take it (the record as the service that dead-lettered the message, the
message as a service that sends its subject), without a single permission violation. A dead letter the
agent forges in its own namespace, naming a command it does not consume, is refused: a replay never
publishes with another service's rights what the agent may not publish itself."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import nats
import nats.js.errors
import pytest

from erpilot.ops.dlq import record_subject
from erpilot.stack.nats_security import ADMIN, password_variable
from erpilot_contracts.subjects import (
    AGENT_CMD_POST_MESSAGE,
    APPROVAL_CMD_DECIDE_MANY,
    COMMANDS_STREAM,
    DEAD_LETTER_STREAM,
    dead_letter_subject,
)
from tests.e2e.test_nats_permissions import INBOXES, secure, violations  # noqa: F401 (the fixture)

pytestmark = pytest.mark.e2e


def dlq(stack_secure, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "ERPILOT_NATS_URL": stack_secure.server.url, "ERPILOT_NATS_USER": ADMIN,
           "ERPILOT_NATS_PASSWORD": stack_secure.passwords[ADMIN],
           "ERPILOT_DATA_DIR": str(stack_secure.stack.data_dir)}  # the other passwords: nats-passwords.json
    for user in stack_secure.passwords:
        env.pop(password_variable(user), None)
    done = subprocess.run([sys.executable, "-m", "erpilot", "dlq", *args], env=env, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode == 0) is ok, done.stderr
    return done


async def test_a_dead_letter_is_listed_and_replayed_once_with_least_privilege(secure):  # noqa: F811
    marker = f"poison-{uuid.uuid4().hex}"
    gateway = await nats.connect(secure.server.url, user="gateway", password=secure.passwords["gateway"],
                                 inbox_prefix="_INBOX.gateway", max_reconnect_attempts=0)
    admin = await nats.connect(secure.server.url, user=ADMIN, password=secure.passwords[ADMIN],
                               max_reconnect_attempts=0)
    try:
        # the gateway sends a command the agent cannot parse: the agent dead-letters it
        await gateway.jetstream().publish(AGENT_CMD_POST_MESSAGE, json.dumps({"tool": marker}).encode(),
                                          stream=COMMANDS_STREAM.name)
        js = admin.jetstream()

        async def dead_letters() -> list:
            letters = json.loads(dlq(secure, "list", "--service", "agent", "--json").stdout)
            return [d for d in letters if marker in json.dumps(json.loads(dlq(secure, "show", str(d["seq"])).stdout))]

        letters = []
        for _ in range(150):  # a deadline, not a synchronisation: stop as soon as it is there
            if letters := await dead_letters():
                break
            await asyncio.sleep(0.2)
        letter = letters[0]
        assert letter["reason"].startswith("invalid message")

        first = dlq(secure, "replay", str(letter["seq"]))
        assert f"{letter['seq']}: replayed to {AGENT_CMD_POST_MESSAGE}" in first.stdout
        replayed = await js.get_last_msg(COMMANDS_STREAM.name, AGENT_CMD_POST_MESSAGE)
        assert marker in replayed.data.decode() and replayed.headers["Erpilot-Replay-Of"] == letter["original"]
        record = await js.get_last_msg(DEAD_LETTER_STREAM.name, record_subject("agent", letter["original"]))
        assert json.loads(record.data)["dead_letter_seq"] == letter["seq"]

        again = dlq(secure, "replay", str(letter["seq"]))
        assert "already replayed, nothing published" in again.stdout
        last = await js.get_last_msg(COMMANDS_STREAM.name, AGENT_CMD_POST_MESSAGE)
        assert last.seq == replayed.seq
    finally:
        await gateway.close()
        await admin.close()
    assert [v for v in violations(secure.server) if v["user"] in ("admin", "agent", "gateway")
            and "erpilot-dlq" in v["client"]] == []


async def last_seq(js, stream: str, subject: str) -> int:
    try:
        return (await js.get_last_msg(stream, subject)).seq
    except nats.js.errors.NotFoundError:
        return 0


async def test_a_dead_letter_the_agent_forges_naming_a_decision_is_refused_and_nothing_is_published(
        secure):  # noqa: F811
    # The agent may publish into its own dead-letter namespace, and writes the original subject itself.
    agent = await nats.connect(secure.server.url, user="agent", password=secure.passwords["agent"],
                               inbox_prefix=INBOXES["agent"], max_reconnect_attempts=0)
    admin = await nats.connect(secure.server.url, user=ADMIN, password=secure.passwords[ADMIN],
                               max_reconnect_attempts=0)
    original = f"{COMMANDS_STREAM.name}:{uuid.uuid4().int % 10**9}"
    try:
        js = admin.jetstream()
        decisions_before = await last_seq(js, COMMANDS_STREAM.name, APPROVAL_CMD_DECIDE_MANY)
        body = json.dumps({"pending_id": "pa_victim", "action": "approve", "fingerprint": "sha256:forged",
                           "actor": {"sub": "a-manager", "roles": ["manager"]}}).encode()
        stream, seq = original.split(":")
        forged = await agent.jetstream().publish(
            dead_letter_subject("agent", APPROVAL_CMD_DECIDE_MANY), body, stream=DEAD_LETTER_STREAM.name,
            headers={"Erpilot-Original-Subject": APPROVAL_CMD_DECIDE_MANY, "Erpilot-Original-Stream": stream,
                     "Erpilot-Original-Seq": seq, "Erpilot-Reason": "invalid message: routine",
                     "Erpilot-Attempts": "1"})

        refused = dlq(secure, "replay", str(forged.seq), ok=False)  # the operator's routine replay
        assert f"dead letter {forged.seq} refused, nothing published" in refused.stderr
        assert f"names {APPROVAL_CMD_DECIDE_MANY}, which agent does not consume" in refused.stderr
        assert await last_seq(js, COMMANDS_STREAM.name, APPROVAL_CMD_DECIDE_MANY) == decisions_before
        assert await last_seq(js, DEAD_LETTER_STREAM.name, record_subject("agent", original)) == 0  # no claim
    finally:
        await agent.close()
        await admin.close()
