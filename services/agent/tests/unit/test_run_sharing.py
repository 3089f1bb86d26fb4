"""Runs beside a waiting run and the tools offered (domain, no I/O)."""

from __future__ import annotations

import pytest

from erpilot_agent.adapters.models import openai_tools
from erpilot_agent.domain.history import assistant_message, group_history, tool_message, user_message
from erpilot_agent.domain.run_sharing import offered_tools, open_calls, with_states
from erpilot_agent.domain.runs import StoredEntry

pytestmark = pytest.mark.unit

HISTORY = [
    StoredEntry("run_1", user_message("submit the order")),
    StoredEntry("run_1", assistant_message(None, [{"id": "run_1:a", "name": "get_draft", "arguments": {}},
                                                  {"id": "run_1:b", "name": "submit_order", "arguments": {}}])),
    StoredEntry("run_1", tool_message("run_1:a", {"status": "succeeded", "result": {}})),
    StoredEntry("run_2", user_message("what does a pen cost?")),
]


def test_open_calls_are_the_other_runs_calls_without_a_result():
    assert open_calls(HISTORY, "run_2") == ["run_1:b"]
    assert open_calls(HISTORY, "run_1") == []  # a run's own calls are its driver's business


def test_the_view_places_the_current_state_after_its_call_without_changing_the_rest():
    pending = {"status": "awaiting_approval", "pending_id": "pa_1"}
    entries = with_states([h.entry for h in HISTORY], {"run_1:b": pending, "run_1:c": None})
    blocks = group_history(entries[:-1])  # run_1:c is not in this history
    assert [tool["tool_call_id"] for tool in blocks[1].results] == ["run_1:a", "run_1:b"]
    assert blocks[1].results[1] == tool_message("run_1:b", pending)
    assert entries[-1] == tool_message("run_1:c", {"status": "in_progress"})
    assert entries[:len(HISTORY)] == [h.entry for h in HISTORY]


def test_denied_tools_are_not_offered():
    specs = openai_tools()
    names = [s["function"]["name"] for s in offered_tools(specs, frozenset({"refund_payment"}))]
    assert "refund_payment" not in names and len(names) == len(specs) - 1
    assert offered_tools(specs, frozenset()) == specs
