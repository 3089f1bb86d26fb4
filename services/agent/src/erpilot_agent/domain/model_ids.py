"""The model boundary of tool-call ids: the model sees its own ids, the agent keeps global ones.

The agent records a model's tool call under a globally unique id (``domain.runs.assistant_turn``:
``<run_id>:<model's id>``), because ``call_id`` keys the ledger, the events and the approvals, and
models reuse ids like ``call_0`` across requests. The model must get its calls back under the ids it
issued (PITFALLS: providers validate ids, e.g. ``^[a-zA-Z0-9_-]+$``), so each stored call also keeps
the model's id verbatim (``model_id``) and ``for_model`` maps the context view back just before the
request: assistant ``tool_calls[].id`` and tool ``tool_call_id`` become the model's ids, parallel
calls and earlier runs included, and ``model_id`` itself is not sent.

The view must be built first, with the global ids: a model's ids may repeat across runs (two runs
both answered ``call_0``), and results are matched to their calls by id. ``for_model`` then relies on
the view's order (each tool result right after its assistant message) and on no other state.

Two cases have no model id to give back: a call the model issued without an id, and a call stored
before ``model_id`` existed. Both get a stable id derived from the global one (for old entries the
model's id as it was embedded, when it is still a valid one).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from erpilot_agent.domain.history import Entry

MODEL_ID = "model_id"  # key of a stored tool call holding the id the model issued
# Keys of the context view's markers (``projected`` / ``omitted``) that name a call: the model must read
# them as the ids it knows too.
_CALL_REFERENCES = ("call_id", "see_call")
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def minted_id(global_id: str) -> str:
    """A valid, stable model-facing id for a call that has no model id of its own."""
    return "call_" + hashlib.sha256(global_id.encode("utf-8")).hexdigest()[:24]


def model_id_of(call: dict[str, Any]) -> str:
    """The id the model issued for a stored call (see the module docstring for the fallbacks)."""
    issued = call.get(MODEL_ID)
    if isinstance(issued, str) and issued:
        return issued
    global_id = str(call.get("id") or "")
    if MODEL_ID not in call:  # stored before model ids were kept: "<run_id>:<model id>"
        embedded = global_id.split(":", 1)[-1]
        if _SAFE_ID.match(embedded):
            return embedded
    return minted_id(global_id)


def for_model(messages: list[Entry]) -> list[Entry]:
    """The context view as sent to the model: every call and result under the model's own id.

    Markers that name a call (``call_id``, ``see_call``; the later call may come after the marker) name
    it by the model's id as well.
    """
    issued = issued_ids(messages)
    return [as_sent(message, issued) for message in messages]


def issued_ids(messages: list[Entry]) -> dict[str, str]:
    """Global call id -> the id the model issued, for every call in ``messages``."""
    return {call["id"]: model_id_of(call) for message in messages for call in message.get("tool_calls") or []}


def as_sent(message: Entry, issued: dict[str, str]) -> Entry:
    """One message of the view as the model gets it (``issued``: from ``issued_ids``)."""
    if message.get("tool_calls"):
        calls = [{key: value for key, value in call.items() if key != MODEL_ID} | {"id": issued[call["id"]]}
                 for call in message["tool_calls"]]
        return {**message, "tool_calls": calls}
    if message.get("role") == "tool":
        call_id = message.get("tool_call_id")
        return {**message, "tool_call_id": issued.get(call_id) or minted_id(str(call_id)),
                "content": _references_for_model(message.get("content"), issued)}
    return message


def _references_for_model(content: Any, issued: dict[str, str]) -> Any:
    """A marker's call references under the model's ids; any other content unchanged."""
    if not isinstance(content, str) or not content.startswith("{") or not any(
            f'"{key}"' in content for key in _CALL_REFERENCES):  # most results name no call: skip the parse
        return content
    try:
        value = json.loads(content)
    except ValueError:
        return content
    if not isinstance(value, dict) or not any(isinstance(value.get(k), str) and value[k] in issued
                                              for k in _CALL_REFERENCES):
        return content
    renamed = {key: issued.get(item, item) if key in _CALL_REFERENCES and isinstance(item, str) else item
               for key, item in value.items()}
    return json.dumps(renamed, ensure_ascii=False, separators=(",", ":"))
