"""The models the agent can ask, behind one small interface.

``ERPILOT_MODEL=rules`` (default): the offline planner of ``domain.rules_planner``.
``ERPILOT_MODEL=openai:<model>``: any OpenAI-compatible chat-completions endpoint through the official
``openai`` SDK (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` from the environment).

A model gets the messages of the context view and the tools in the OpenAI function format and
returns a ``ModelReply``; every failure is a ``ModelError`` (``model_timeout`` or ``model_error``).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol

from erpilot_agent.domain.history import Entry
from erpilot_agent.domain.rules_planner import plan
from erpilot_agent.domain.runs import ModelError, ModelReply, ModelToolCall
from erpilot_contracts.tools.v1 import TOOLS
from erpilot_platform.settings import ConfigurationError
from erpilot_platform.waiting import within

log = logging.getLogger(__name__)


class Model(Protocol):
    name: str

    async def complete(self, messages: list[Entry], tools: list[dict[str, Any]]) -> ModelReply:
        """The model's next step; raises ModelError."""
        ...


def openai_tools() -> list[dict[str, Any]]:
    """The contracts tool catalog in the OpenAI function-tool format."""
    return [
        {"type": "function",
         "function": {"name": spec.name, "description": spec.description, "parameters": spec.input_schema()}}
        for spec in TOOLS.values()
    ]


class RulesModel:
    """The offline planner for the small command language (see ``domain.rules_planner``)."""

    name = "rules"

    def __init__(self, call_id_prefix: str = "rules-"):
        self.call_id_prefix = call_id_prefix

    async def complete(self, messages: list[Entry], tools: list[dict[str, Any]]) -> ModelReply:
        reply = plan(messages, call_id_prefix=self.call_id_prefix)
        return ModelReply(reply.text, [ModelToolCall(c["id"], c["name"], c["arguments"]) for c in reply.tool_calls])


class OpenAIModel:
    """Chat completions through the official SDK; ``timeout`` bounds the whole request, retries included."""

    def __init__(self, model: str, *, timeout: float, max_retries: int = 1, client: Any = None):
        self.name = f"openai:{model}"
        self.model = model
        self.timeout = timeout
        if client is None:
            from openai import AsyncOpenAI

            base_url = os.environ.get("OPENAI_BASE_URL") or None
            api_key = os.environ.get("OPENAI_API_KEY")
            if not api_key and not base_url:
                raise ConfigurationError(f"ERPILOT_MODEL={self.name} needs OPENAI_API_KEY (or OPENAI_BASE_URL)")
            # A local OpenAI-compatible server often needs no key; the SDK insists on one.
            client = AsyncOpenAI(api_key=api_key or "unused", base_url=base_url, timeout=timeout,
                                 max_retries=max_retries)
        self.client = client

    async def complete(self, messages: list[Entry], tools: list[dict[str, Any]]) -> ModelReply:
        import openai

        try:
            completion = await within(
                self.client.chat.completions.create(model=self.model, messages=messages, tools=tools),
                self.timeout)
        except (TimeoutError, openai.APITimeoutError):
            raise ModelError("model_timeout", f"{self.name} did not answer within {self.timeout:g}s") from None
        except openai.APIStatusError as exc:
            raise ModelError("model_error", f"{self.name} answered HTTP {exc.status_code}: {_short(exc)}") from None
        except openai.APIConnectionError as exc:
            raise ModelError("model_error", f"{self.name} could not be reached: {_short(exc)}") from None
        except Exception as exc:  # a malformed body (not JSON, wrong shape) surfaces here
            raise ModelError("model_error", f"{self.name} gave an unreadable answer: {_short(exc)}") from None
        return parse_completion(completion, self.name)


def parse_completion(completion: Any, name: str = "model") -> ModelReply:
    """A ModelReply from a chat completion, or ModelError when it does not have the expected shape."""
    if isinstance(completion, str | bytes):  # the SDK hands back a body that is not JSON as text
        raise ModelError("model_error", f"{name} did not answer with a chat completion: {_short_text(completion)}")
    try:
        choices = completion.choices
        message = choices[0].message
        text = message.content
        raw_calls = message.tool_calls or []
        calls = []
        for raw in raw_calls:
            function = raw.function
            calls.append(ModelToolCall(id=str(raw.id or ""), name=str(function.name or ""),
                                       arguments=function.arguments if function.arguments is not None else ""))
    except Exception as exc:
        raise ModelError("model_error", f"{name} answered with something that is not a chat completion "
                                        f"({type(exc).__name__}: {_short(exc)})") from None
    if text is not None and not isinstance(text, str):
        raise ModelError("model_error", f"{name} gave a non-text message content")
    return ModelReply(text, calls)


def _short(exc: BaseException) -> str:
    return _short_text(str(exc) or type(exc).__name__)


def _short_text(text: str | bytes, limit: int = 200) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def build_model(spec: str, *, timeout: float, max_retries: int = 1) -> Model:
    """The model named by ``ERPILOT_MODEL``; a bad name stops start-up."""
    if spec == "rules":
        return RulesModel()
    if spec.startswith("openai:") and spec.removeprefix("openai:").strip():
        return OpenAIModel(spec.removeprefix("openai:").strip(), timeout=timeout, max_retries=max_retries)
    raise ConfigurationError(f"ERPILOT_MODEL={spec!r}: use 'rules' or 'openai:<model>'")
