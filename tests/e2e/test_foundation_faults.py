"""Foundation guarantees seen from outside: NATS restarts, a service that is down, poison messages,
missing secrets, and `erpilot up` leaving nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid

import httpx
import pytest

from erpilot.stack.stack import Stack, free_port
from erpilot_platform.embedded import EmbeddedNats
from erpilot_platform.testing.backends import postgres_scratch_dir
from tests.e2e.conftest import SECRET, Api, wait_for
from tests.e2e.test_write_flow import decide, draft, finished, request_write, stock
from tests.e2e.up_process import UpProcess, alive

pytestmark = pytest.mark.e2e


@pytest.fixture
def own_nats(tmp_path):
    """A NATS server of this test alone, so it can be restarted without disturbing other tests."""
    if os.environ.get("ERPILOT_TEST_NATS_URL"):
        pytest.skip("restarting NATS needs the embedded server (ERPILOT_TEST_NATS_URL is set)")
    nats = EmbeddedNats(tmp_path / "nats-data")
    nats.start()
    yield nats
    nats.stop()


@pytest.fixture
def own_stack(own_nats, database_url, tmp_path):
    running = Stack(own_nats.url, database_url, tmp_path / "stack", http_port=free_port(), env={
        "ERPILOT_AUTH_SECRET": SECRET, "ERPILOT_REQUEST_TIMEOUT_SECONDS": "3"})
    running.start()
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def ready(stack: Stack) -> bool:
    try:
        return httpx.get(f"{stack.base_url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_services_keep_working_when_nats_restarts(own_stack, own_nats):
    user = Api(own_stack.base_url, "restart-user", "requester")
    session_id = user.new_session()
    assert user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}).status_code == 200

    own_nats.stop()
    wait_for(lambda: not ready(own_stack), timeout=10)
    own_nats.start()
    wait_for(lambda: ready(own_stack), timeout=30)

    after = user.call(session_id, "get_product", {"sku": "SKU-PAPER-A3"})
    assert after.status_code == 200, after.text
    assert after.json()["result"]["sku"] == "SKU-PAPER-A3"
    events = user.events(session_id, until=lambda evs: len(evs) >= 4)
    assert [e["seq"] for e in events] == [1, 2, 3, 4]


def test_commands_and_events_in_flight_during_a_nats_outage_are_handled_once_after_it(own_stack, own_nats):
    """What JetStream holds when NATS goes down (a decision's event) survives the restart; a tool call, a core
    request that no stream holds (issue 31), is answered 503 and runs once when its client sends it again."""
    user = Api(own_stack.base_url, f"outage-{uuid.uuid4().hex[:6]}", "requester")
    approver = Api(own_stack.base_url, f"outage-appr-{uuid.uuid4().hex[:6]}", "approver")
    session_id = user.new_session()
    revision = draft(user, session_id, [("SKU-NOTEBOOK-A5", 2)])
    pending = request_write(user, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    before = stock(user, "SKU-NOTEBOOK-A5")

    own_stack.supervisor.stop("agent")  # nobody consumes: the decision's event stays in JetStream, unhandled
    call_id = f"queued-{uuid.uuid4().hex}"
    queued = user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id=call_id)
    assert queued.status_code == 503 and queued.json()["code"] == "service_unavailable"
    assert decide(approver, pending, "approve").status_code == 200  # its event waits for the agent

    own_nats.stop()  # the outage, with an event in flight
    wait_for(lambda: not ready(own_stack), timeout=30)
    own_nats.start()
    own_stack.supervisor.restart("agent")
    wait_for(lambda: ready(own_stack), timeout=60)

    assert user.get(f"/v1/sessions/{session_id}/tool-calls/{call_id}").status_code == 404  # stored nowhere
    again = user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id=call_id)  # the client's retry
    assert again.status_code == 200, again.text
    assert again.json()["outcome"] == "succeeded" and again.json()["result"]["sku"] == "SKU-PAPER-A4"
    committed = finished(user, session_id, pending["call_id"], timeout=60)
    assert committed["outcome"] == "succeeded"
    assert stock(user, "SKU-NOTEBOOK-A5") == before - 2  # exactly once
    events = user.events(session_id, until=lambda evs: {call_id, pending["call_id"]} <= {
        e["data"]["call_id"] for e in evs if e["type"] == "tool_finished"})
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events if e["data"].get("call_id") == pending["call_id"]].count("tool_finished") == 1
    assert [e["type"] for e in events if e["data"].get("call_id") == call_id] == ["tool_started", "tool_finished"]


def test_a_tool_call_sent_while_the_agent_is_down_is_answered_503_and_runs_once_when_sent_again(own_stack):
    """``req.agent.tool_call`` is a core request (issue 31): with no agent the gateway sends it again until its
    timeout, then answers 503 and nothing is stored; the client's retry with the same call id runs it once."""
    user = Api(own_stack.base_url, "down-user", "requester")
    session_id = user.new_session()
    own_stack.supervisor.stop("agent")

    waiting = user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id="while-agent-down")
    assert waiting.status_code == 503 and waiting.json()["code"] == "service_unavailable"

    own_stack.supervisor.restart("agent")
    wait_for(lambda: ready(own_stack), timeout=30)
    assert user.get(f"/v1/sessions/{session_id}/tool-calls/while-agent-down").status_code == 404
    answers = [user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}, call_id="while-agent-down")
               for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200] and answers[0].json() == answers[1].json()
    assert answers[0].json()["outcome"] == "succeeded" and answers[0].json()["result"]["sku"] == "SKU-PAPER-A4"
    events = user.events(session_id, until=lambda evs: any(e["type"] == "tool_finished" for e in evs))
    assert [e["type"] for e in events if e["data"].get("call_id") == "while-agent-down"] == [
        "tool_started", "tool_finished"]


async def test_a_poison_message_is_answered_and_does_not_block(stack):
    from faststream.nats import NatsBroker

    broker = NatsBroker(stack.nats_url)
    await broker.connect()
    try:
        garbage = await broker.request(b"{not json", "erpilot.v1.cmd.agent.post_message", stream="ERPILOT_COMMANDS",
                                       timeout=10)
        wrong_shape = await broker.request({"text": 42}, "erpilot.v1.cmd.agent.post_message",
                                           stream="ERPILOT_COMMANDS", timeout=10)
        js = broker.config.connection_state.stream
        dead = await js.get_last_msg("ERPILOT_DEAD_LETTERS", "erpilot.v1.dlq.agent.cmd.agent.post_message")
        # A retried command (a core request: nothing stored it, nothing waits behind it) is answered alone.
        core_garbage = await broker.request(b"{not json", "erpilot.v1.req.agent.tool_call", timeout=10)
        core_wrong_shape = await broker.request({"tool": 42}, "erpilot.v1.req.agent.tool_call", timeout=10)
    finally:
        await broker.stop()

    for reply in (garbage, wrong_shape, core_garbage, core_wrong_shape):
        body = json.loads(reply.body)
        assert body["ok"] is False and body["error"]["code"] == "invalid_message"
    assert dead.headers["Erpilot-Reason"].startswith("invalid message")
    user = Api(stack.base_url, "after-poison", "requester")
    assert user.call(user.new_session(), "get_product", {"sku": "SKU-PAPER-A4"}).status_code == 200


def test_a_missing_secret_stops_start_up_with_a_clear_message(database_url, nats_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERPILOT_")}
    env.update({"ERPILOT_NATS_URL": nats_url, "ERPILOT_DATABASE_URL": database_url})
    result = subprocess.run([sys.executable, "-m", "erpilot", "serve", "gateway"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "ERPILOT_AUTH_SECRET is not set" in result.stderr


@pytest.fixture
def up_data_dir():
    """Outside pytest's tmp tree: as root, `erpilot up` runs PostgreSQL as another user, who must traverse
    every parent of the data dir, and any pytest session starting meanwhile resets /tmp/pytest-of-root to 0700."""
    path = postgres_scratch_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("sig, moment", [
    (signal.SIGINT, "running"), (signal.SIGINT, "starting"), (signal.SIGTERM, "running"),
    (signal.SIGTERM, "starting"), (signal.SIGKILL, "running")],
    ids=["sigint", "sigint-at-start-up", "sigterm", "sigterm-at-start-up", "sigkill"])
def test_erpilot_up_leaves_no_stray_process(up_data_dir, sig, moment):
    """A stop by SIGINT/SIGTERM exits 0 after "stopped." wherever it lands (CLI help: `erpilot up --help`):
    while serving, or during start-up (here: while it migrates, with NATS and PostgreSQL already running)."""
    up = UpProcess(up_data_dir)
    try:
        if moment == "starting":
            up.wait_line(r"^migrating \.\.\.$")
            children = set(up.processes())
            assert len(children) >= 2, "NATS and PostgreSQL should be running"
        else:
            up.wait_running()
            children = set(up.processes())
            assert len(children) >= 6, "NATS, PostgreSQL and four services should be running"
        code = up.stop(sig, timeout=60)
        if sig != signal.SIGKILL:  # an orderly stop: everything stopped, then a clean exit
            assert code == 0, up.output
            assert up.lines[-1] == "stopped.", up.output
            assert "Traceback" not in up.output, up.output
    finally:
        up.kill()  # the test failed early: never leave a stack running

    wait_for(lambda: not [pid for pid in children if alive(pid)], timeout=30)
