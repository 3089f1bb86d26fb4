"""The model adapters: the OpenAI tool format, reading a completion, and failures as ModelError."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from erpilot_agent.adapters.models import OpenAIModel, RulesModel, build_model, openai_tools, parse_completion
from erpilot_agent.domain.runs import ModelError, ModelReply, ModelToolCall
from erpilot_contracts.tools.v1 import TOOLS
from erpilot_platform.settings import ConfigurationError

pytestmark = pytest.mark.unit


def completion(content=None, tool_calls=None):
    message = SimpleNamespace(content=content, tool_calls=tool_calls)
    return SimpleNamespace(choices=[SimpleNamespace(message=message)])


def tool_call(call_id, name, arguments):
    return SimpleNamespace(id=call_id, type="function", function=SimpleNamespace(name=name, arguments=arguments))


class FakeClient:
    def __init__(self, answer):
        self.answer = answer
        self.sent = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    async def create(self, **kwargs):
        self.sent.append(kwargs)
        if isinstance(self.answer, BaseException):
            raise self.answer
        if self.answer == "hang":
            await asyncio.sleep(10)
        return self.answer


def test_tools_are_the_contract_catalog_in_the_openai_function_format():
    tools = openai_tools()
    assert [t["function"]["name"] for t in tools] == list(TOOLS)
    refund = next(t for t in tools if t["function"]["name"] == "refund_payment")
    assert refund["type"] == "function"
    assert refund["function"]["description"] == TOOLS["refund_payment"].description
    assert refund["function"]["parameters"] == TOOLS["refund_payment"].input_schema()
    assert refund["function"]["parameters"]["properties"]["amount_minor"]["type"] == "integer"


def test_a_completion_with_text_and_parallel_calls_is_read_as_is():
    reply = parse_completion(completion("Looking.", [tool_call("c1", "get_product", '{"sku":"S"}'),
                                                     tool_call("c2", "get_order", "{bad")]))
    assert reply == ModelReply("Looking.", [ModelToolCall("c1", "get_product", '{"sku":"S"}'),
                                            ModelToolCall("c2", "get_order", "{bad")])


@pytest.mark.parametrize("garbage", ["<html>oops</html>", SimpleNamespace(choices=[]), SimpleNamespace(),
                                     completion(content={"not": "text"}),
                                     completion(tool_calls=[SimpleNamespace(id="x", type="custom")])])
def test_an_unreadable_completion_is_a_model_error(garbage):
    with pytest.raises(ModelError) as caught:
        parse_completion(garbage)
    assert caught.value.code == "model_error"


async def test_the_openai_model_sends_model_messages_and_tools():
    client = FakeClient(completion("hi"))
    model = OpenAIModel("gpt-x", timeout=5, client=client)
    messages = [{"role": "user", "content": "hello"}]

    assert await model.complete(messages, openai_tools()) == ModelReply("hi", [])
    assert client.sent == [{"model": "gpt-x", "messages": messages, "tools": openai_tools()}]


async def test_a_slow_model_is_a_model_timeout_and_an_exception_a_model_error():
    with pytest.raises(ModelError) as slow:
        await OpenAIModel("m", timeout=0.05, client=FakeClient("hang")).complete([], [])
    with pytest.raises(ModelError) as broken:
        await OpenAIModel("m", timeout=5, client=FakeClient(ValueError("Expecting value"))).complete([], [])
    assert slow.value.code == "model_timeout"
    assert broken.value.code == "model_error" and "Expecting value" in broken.value.message


def test_build_model_picks_by_name_and_refuses_unknown_names(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert isinstance(build_model("rules", timeout=1), RulesModel)
    assert build_model("openai:gpt-4o-mini", timeout=1).name == "openai:gpt-4o-mini"
    for bad in ("gpt-4", "openai:", "rule"):
        with pytest.raises(ConfigurationError):
            build_model(bad, timeout=1)
