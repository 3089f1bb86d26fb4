"""``broker.call``: a request to a declared endpoint whose ok reply comes back as the endpoint's reply model,
whose failure is a typed error, and which refuses a request of another model before sending anything."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.requests import Endpoint
from erpilot_platform.broker import ReplyError, call

pytestmark = pytest.mark.unit


class Ping(Message):
    text: str


class Pong(Message):
    echoed: str
    count: int = 0


class Other(Message):
    text: str


PING = Endpoint("erpilot.v1.query.test.ping", Ping, Pong, durable=False)
PING_COMMAND = Endpoint("erpilot.v1.cmd.test.ping", Ping, Pong, durable=True)


class AnsweringBroker:
    """Answers every request with ``reply`` and keeps what was sent (no server: the wire is not the subject)."""

    def __init__(self, reply: ReplyV1):
        self.reply = reply
        self.sent: list[tuple[str, dict, str | None]] = []

    async def request(self, data: dict, subject: str, *, stream: str | None, timeout: float):
        self.sent.append((subject, data, stream))
        return SimpleNamespace(body=self.reply.model_dump_json().encode())


async def test_an_ok_reply_comes_back_as_the_reply_model():
    broker = AnsweringBroker(ReplyV1.success({"echoed": "hi", "count": 2}))

    pong = await call(broker, PING, Ping(text="hi"))

    assert pong == Pong(echoed="hi", count=2)
    assert broker.sent == [("erpilot.v1.query.test.ping", {"schema_version": 1, "text": "hi"}, None)]


async def test_a_durable_call_goes_through_the_command_stream():
    broker = AnsweringBroker(ReplyV1.success({"echoed": "hi"}))

    await call(broker, PING_COMMAND, Ping(text="hi"))

    assert broker.sent[0][2] == "ERPILOT_COMMANDS"


async def test_a_failed_reply_raises_reply_error_with_the_services_error():
    broker = AnsweringBroker(ReplyV1.failure("not_found", "no such thing", 404, id="x"))

    with pytest.raises(ReplyError) as caught:
        await call(broker, PING, Ping(text="hi"))

    assert str(caught.value) == "not_found: no such thing"
    assert caught.value.subject == "erpilot.v1.query.test.ping"
    assert (caught.value.error.code, caught.value.error.status, caught.value.error.details) == (
        "not_found", 404, {"id": "x"})


async def test_ok_data_that_does_not_fit_the_model_is_a_validation_error():
    broker = AnsweringBroker(ReplyV1.success({"unexpected": True}))

    with pytest.raises(ValidationError):
        await call(broker, PING, Ping(text="hi"))


async def test_a_request_of_another_model_is_a_type_error_and_nothing_is_sent():
    broker = AnsweringBroker(ReplyV1.success({"echoed": "hi"}))

    with pytest.raises(TypeError, match="takes Ping, not Other"):
        await call(broker, PING, Other(text="hi"))

    assert broker.sent == []


def test_an_endpoint_whose_subject_contradicts_its_durability_is_refused():
    with pytest.raises(ValueError):
        Endpoint("erpilot.v1.query.test.ping", Ping, Pong, durable=True)
    with pytest.raises(ValueError):
        Endpoint("erpilot.v1.cmd.test.ping", Ping, Pong, durable=False)
