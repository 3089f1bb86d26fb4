"""`erpilot context-eval`: every frozen long session keeps what its next step needs, in a small request."""

from __future__ import annotations

import json

import pytest

from erpilot.cli import main as cli_main
from erpilot.context_eval import run as context_eval
from erpilot.context_eval.facts import DraftLine, EveryUserMessage, LatestResult, UserSays, pairs_intact
from erpilot.context_eval.long_sessions import issue_27
from erpilot.context_eval.scenarios import all_scenarios, issue_19, line_of

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def outcomes() -> list[context_eval.Outcome]:
    return context_eval.run()


def test_at_least_ten_scenarios_under_real_pressure_all_pass(outcomes):
    assert len(outcomes) >= 10
    for o in outcomes:
        assert o.full_tokens >= 4 * o.budget_tokens, o.scenario  # raw history at least 4x the budget
        assert o.error is None and all(o.facts.values()), (o.scenario, o.facts)
        assert o.pairs_intact, o.scenario
        assert o.request_tokens <= o.budget_tokens, o.scenario
        assert o.request_bytes <= 0.25 * o.full_bytes, o.scenario
        assert o.passed
    assert sum(o.passed for o in outcomes) == len(outcomes)


def test_the_covered_failure_classes_are_all_there():
    names = {s.name for s in all_scenarios()}
    assert {"issue_19_line_17", "middle_line_of_long_draft", "early_independent_requirement",
            "newer_none_after_success", "newer_failure_after_success", "two_open_drafts", "successive_revisions",
            "full_customer_names", "parallel_calls", "issue_27_catalog_once_more", "forty_distinct_lookups",
            "draft_reworked_14_times"} <= names


def test_the_issue_27_session_ends_with_the_catalog_again_and_keeps_the_draft_and_every_user_message():
    scenario = issue_27()
    assert scenario.budget_tokens == 4000
    users = [m["content"] for m in scenario.history if m["role"] == "user"]
    assert users[:11] == ["find products and customers"] * 11 and users[12] == "show me the catalog once more"
    assert users[11].startswith("draft for C-1001: ") and users[11].count(" x") == 26
    both = [sorted(c["function"]["name"] for c in m["tool_calls"]) for m in scenario.history if m.get("tool_calls")]
    assert both[:11] == [["search_customers", "search_products"]] * 11
    assert scenario.history[-1]["role"] == "tool"  # the model now answers from the new listing
    calls = [c for m in scenario.history for c in m.get("tool_calls") or []]
    assert all(c["id"].endswith(":" + c["model_id"]) for c in calls)  # stored as the agent stores them
    outcome = context_eval.evaluate(scenario)
    assert outcome.passed and outcome.full_tokens >= 4 * 4000, outcome
    assert outcome.facts["all 13 user messages verbatim"]


def test_the_issue_scenario_keeps_line_17_of_the_26_line_draft_in_view():
    scenario = issue_19()
    assert scenario.budget_tokens == 4000
    listings = [m for m in scenario.history if m["role"] == "assistant" and m.get("tool_calls")
                and m["tool_calls"][0]["function"]["name"].startswith("search_")]
    assert len(listings) == 11 and scenario.history[-1]["content"] == "change line 17 to quantity 2"
    outcome = context_eval.evaluate(scenario)
    [line_fact] = [fact for fact in outcome.facts if "line 17" in fact]
    assert outcome.facts[line_fact] and outcome.passed


def test_facts_are_absent_from_a_request_that_lacks_them():
    scenario = issue_19()
    created = json.loads(next(m["content"] for m in scenario.history if m["role"] == "tool"
                              and "D-1001" in m["content"]))["result"]
    line = line_of(created, 17)
    fact = DraftLine("D-1001", 1, 17, line["sku"], line["qty"])
    assert fact.present(scenario.history)
    assert not DraftLine("D-1001", 1, 17, line["sku"], line["qty"] + 1).present(scenario.history)
    assert not fact.present([m for m in scenario.history if m["role"] != "tool"])
    marker = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_product", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": json.dumps({"omitted": True, "sku": "S", "on_hand": 1})}]
    assert not LatestResult("get_product", "code", "not_found").present(marker)
    assert not UserSays("gate 4").present(marker)
    users = EveryUserMessage(tuple(m["content"] for m in scenario.history if m["role"] == "user"))
    assert users.present(scenario.history) and not users.present(scenario.history[1:])
    cut = [{**m, "content": m["content"][:-1]} if m["role"] == "user" else m for m in scenario.history]
    assert not users.present(cut)
    assert pairs_intact(marker) and not pairs_intact(marker[1:]) and not pairs_intact(marker[:1])


def test_the_cli_prints_the_table_and_exits_zero(capsys):
    with pytest.raises(SystemExit) as exited:
        cli_main(["context-eval"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "| `issue_19_line_17` |" in out and "scenarios pass" in out
