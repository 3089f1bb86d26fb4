"""Pure decisions of the model loop: what comes next, and the ids of the model's calls."""

from __future__ import annotations

import pytest

from erpilot_agent.domain.history import assistant_message, tool_message, user_message
from erpilot_agent.domain.runs import (
    CALL_ID_MAX,
    AskModel,
    CallRequest,
    Finish,
    ModelError,
    ModelReply,
    ModelToolCall,
    RunCalls,
    StoredEntry,
    assistant_turn,
    next_action,
    rejected_content,
)

pytestmark = pytest.mark.unit


def stored(run_id, *entries):
    return [StoredEntry(run_id, entry) for entry in entries]


def call(call_id, name="get_product", **arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


def test_a_fresh_run_asks_the_model():
    assert next_action(stored("r1", user_message("hi")), "r1") == AskModel()


def test_calls_without_results_are_run_and_answered_ones_skipped():
    history = stored("r1", user_message("hi"),
                     assistant_message(None, [call("r1:a", sku="S"), call("r1:b")]),
                     tool_message("r1:a", {"status": "succeeded", "result": {}}))
    assert next_action(history, "r1") == RunCalls([CallRequest("r1:b", "get_product", "{}")])


def test_all_results_in_asks_the_model_and_a_text_answer_finishes():
    history = stored("r1", user_message("hi"), assistant_message(None, [call("r1:a")]),
                     tool_message("r1:a", {"status": "succeeded", "result": {}}))
    assert next_action(history, "r1") == AskModel()
    assert next_action([*history, *stored("r1", assistant_message("done"))], "r1") == Finish("done")


def test_only_this_runs_messages_count():
    earlier = stored("r0", user_message("old"), assistant_message("old answer"))
    assert next_action([*earlier, *stored("r1", user_message("new"))], "r1") == AskModel()


def test_call_ids_are_prefixed_by_the_run_and_made_unique():
    history = stored("r1", user_message("hi"), assistant_message(None, [call("r1:call_0")]),
                     tool_message("r1:call_0", {}))
    reply = ModelReply(None, [ModelToolCall("call_0", "get_product", {"sku": "S"}),
                              ModelToolCall("call_0", "get_order", '{"order_id":"O-1"}'),
                              ModelToolCall("", "x", "{}"),
                              ModelToolCall("weird id/ü", "x", "{}"),
                              ModelToolCall("x" * 300, "x", "{}")])
    entry = assistant_turn(reply, "r1", history)
    ids = [c["id"] for c in entry["tool_calls"]]
    assert ids[:4] == ["r1:call_0-2", "r1:call_0-3", "r1:call", "r1:weird_id__"]
    assert len(set(ids)) == 5 and all(len(i) <= CALL_ID_MAX for i in ids)
    assert entry["tool_calls"][0]["function"] == {"name": "get_product", "arguments": '{"sku": "S"}'}
    assert entry["tool_calls"][1]["function"]["arguments"] == '{"order_id":"O-1"}'  # the model's text, kept


def test_an_answer_with_nothing_in_it_is_a_model_error():
    with pytest.raises(ModelError):
        assistant_turn(ModelReply(None), "r1", [])


def test_rejections_tell_the_model_what_went_wrong():
    assert rejected_content("policy_denied", "no")["status"] == "not_executed"
    bad = rejected_content("invalid_arguments", "bad", {"errors": [{"loc": ["sku"]}]})
    assert bad == {"status": "failed", "error": {"code": "invalid_arguments", "message": "bad",
                                                  "errors": [{"loc": ["sku"]}]}}
