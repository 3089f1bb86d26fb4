"""A retried command (``requests.retried``: a core request its receiver stores before it answers) is sent again,
the same message, while no answer comes or the answer is a transient 503; never after an answer that stands."""

from __future__ import annotations

import json
from types import SimpleNamespace

import nats.errors
import pytest

from erpilot_contracts import requests
from erpilot_contracts.agent.v1 import StartToolCallV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform import broker as broker_module
from erpilot_platform.broker import ServiceUnavailable, send

pytestmark = pytest.mark.unit
CALL = StartToolCallV1(session_id="ses_1", owner="alice", tool="get_product", arguments={"sku": "SKU-A"},
                       call_id="c-1")
VIEW = {"call_id": "c-1", "session_id": "ses_1", "tool": "get_product", "arguments": {"sku": "SKU-A"},
        "status": "finished"}


class ScriptedBroker:
    """Answers each request with the next of ``script``: an exception is raised, a ``ReplyV1`` is the answer."""

    def __init__(self, *script) -> None:
        self.script = list(script)
        self.sent: list[tuple[dict, str, str | None, float]] = []
        self.connection = SimpleNamespace(max_payload=1024 * 1024)

    async def request(self, data, subject, *, stream=None, timeout):
        self.sent.append((data, subject, stream, timeout))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return SimpleNamespace(body=json.dumps(step.model_dump(mode="json")).encode())


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(broker_module, "RETRY_PAUSE_SECONDS", 0.0)


async def test_a_lost_or_unanswered_request_is_sent_again_as_the_same_core_request_until_it_is_answered():
    broker = ScriptedBroker(nats.errors.TimeoutError(), nats.errors.NoRespondersError(),
                            ReplyV1.failure("service_unavailable", "database away", 503), ReplyV1.success(VIEW))

    reply = await send(broker, requests.AGENT_TOOL_CALL, CALL, timeout=9.0)

    assert reply.ok and reply.data["call_id"] == "c-1"
    sent = [(subject, stream) for _, subject, stream, _ in broker.sent]
    assert sent == [("erpilot.v1.req.agent.tool_call", None)] * 4
    assert all(data == CALL.model_dump(mode="json") for data, *_ in broker.sent)  # the same key every time
    assert all(timeout <= 3.0 for *_, timeout in broker.sent)  # each attempt waits its share of the timeout


async def test_an_answer_that_stands_is_never_sent_again():
    broker = ScriptedBroker(ReplyV1.failure("idempotency_conflict", "other request", 409))

    reply = await send(broker, requests.AGENT_TOOL_CALL, CALL, timeout=9.0)

    assert (reply.ok, reply.error.code, len(broker.sent)) == (False, "idempotency_conflict", 1)


async def test_when_the_time_is_spent_the_last_failure_stands(monkeypatch):
    monkeypatch.setattr(broker_module, "RETRY_PAUSE_SECONDS", 0.05)
    broker = ScriptedBroker(*[nats.errors.NoRespondersError()] * 100)

    with pytest.raises(ServiceUnavailable, match="no service is listening"):
        await send(broker, requests.AGENT_TOOL_CALL, CALL, timeout=0.3)
    assert 2 <= len(broker.sent) < 100


async def test_a_durable_command_or_a_query_is_sent_once():
    broker = ScriptedBroker(nats.errors.TimeoutError())

    with pytest.raises(ServiceUnavailable):
        await send(broker, requests.AGENT_POST_MESSAGE, requests.AGENT_POST_MESSAGE.request(
            session_id="ses_1", owner="alice", text="hi", message_id="m-1"), timeout=1.0)
    assert len(broker.sent) == 1 and broker.sent[0][2] == "ERPILOT_COMMANDS"
