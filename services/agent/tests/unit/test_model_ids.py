"""The model boundary of tool-call ids: the model sees the ids it issued, never the agent's global ones."""

from __future__ import annotations

import copy
import json

import pytest

from erpilot_agent.domain.history import assistant_message, tool_message, user_message
from erpilot_agent.domain.model_ids import for_model, minted_id, model_id_of
from erpilot_agent.domain.runs import ModelReply, ModelToolCall, StoredEntry, assistant_turn

pytestmark = pytest.mark.unit


def turn(run_id, history, *ids):
    reply = ModelReply(None, [ModelToolCall(i, "get_product", {"sku": "S"}) for i in ids])
    return assistant_turn(reply, run_id, [StoredEntry(None, e) for e in history])


def test_the_stored_call_keeps_the_models_id_verbatim_beside_the_global_one():
    entry = turn("run_1", [], "toolu_01ABC", "weird id/ü", "")
    assert [(c["id"], c["model_id"]) for c in entry["tool_calls"]] == [
        ("run_1:toolu_01ABC", "toolu_01ABC"), ("run_1:weird_id__", "weird id/ü"), ("run_1:call", "")]


def test_parallel_calls_and_ids_repeated_across_runs_go_back_under_the_models_ids():
    history = [user_message("a")]
    history.append(first := turn("run_1", history, "call_0", "toolu_01ABC"))
    history += [tool_message("run_1:call_0", {"n": 1}), tool_message("run_1:toolu_01ABC", {"n": 2}),
                assistant_message("ok"), user_message("b")]
    history.append(second := turn("run_2", history, "call_0"))
    history.append(tool_message("run_2:call_0", {"n": 3}))
    assert [c["id"] for c in first["tool_calls"] + second["tool_calls"]] == [
        "run_1:call_0", "run_1:toolu_01ABC", "run_2:call_0"]  # globally unique for the ledger
    before = copy.deepcopy(history)

    sent = for_model(history)

    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_0", "toolu_01ABC"]
    assert [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"] == [
        ("call_0", '{"n": 1}'), ("toolu_01ABC", '{"n": 2}'), ("call_0", '{"n": 3}')]
    assert [c["id"] for c in sent[6]["tool_calls"]] == ["call_0"]
    assert sent[1]["tool_calls"][0] == {"id": "call_0", "type": "function",
                                        "function": {"name": "get_product", "arguments": '{"sku": "S"}'}}
    assert sent[0] == history[0] and sent[4] == history[4]  # other messages untouched
    assert history == before  # the stored history is never changed


def test_an_odd_model_id_is_sent_back_exactly_as_issued():
    history = [user_message("a"), turn("run_1", [], "weird id/ü")]
    history.append(tool_message("run_1:weird_id__", {}))
    sent = for_model(history)
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] == "weird id/ü"


def test_a_call_without_a_model_id_gets_a_stable_valid_one():
    entry = turn("run_1", [], "")
    sent = for_model([entry, tool_message("run_1:call", {})])
    assert sent[0]["tool_calls"][0]["id"] == sent[1]["tool_call_id"] == minted_id("run_1:call")
    assert minted_id("run_1:call") == minted_id("run_1:call") != minted_id("run_2:call")
    assert minted_id("run_1:call").replace("_", "").isalnum()


def test_calls_stored_before_model_ids_were_kept_use_the_embedded_id_when_it_is_valid():
    assert model_id_of({"id": "run_ab12:call_7"}) == "call_7"
    assert model_id_of({"id": "run_ab12:rules-3"}) == "rules-3"
    assert model_id_of({"id": "run_ab12:a.b:c"}) == minted_id("run_ab12:a.b:c")  # not a valid id any more
    assert model_id_of({"id": "run_ab12:call", "model_id": ""}) == minted_id("run_ab12:call")


def test_a_marker_names_calls_by_the_ids_the_model_issued():
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "run_a:call_0", "model_id": "call_0", "type": "function",
             "function": {"name": "search_products", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "run_a:call_0",
         "content": '{"omitted":true,"call_id":"run_a:call_0","see_call":"run_b:toolu_1","reason":"duplicate"}'},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "run_b:toolu_1", "model_id": "toolu_1", "type": "function",
             "function": {"name": "search_products", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "run_b:toolu_1", "content": '{"items":[],"call_id_note":"run_a:call_0"}'},
    ]

    sent = for_model(messages)

    assert json.loads(sent[1]["content"]) == {"omitted": True, "call_id": "call_0", "see_call": "toolu_1",
                                              "reason": "duplicate"}
    assert sent[3]["content"] == messages[3]["content"]  # only marker references are renamed
