"""A 500-line draft, built through the API and edited by line number through the rules model (issue 17).

The model sees the session's open draft only through the context view: too long for
ERPILOT_CONTEXT_TOOL_BYTES even as a summary, it is shown compactly with the line the person named, so
the planner can send line 317's SKU as ``expected_sku``. ``get_draft`` pages read the result back.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Api
from tests.e2e.test_model_runs import assistant_texts, run_events, start_run

pytestmark = pytest.mark.e2e

SKUS = ("SKU-PAPER-A4", "SKU-PAPER-A3", "SKU-PEN-BLUE", "SKU-MARKER-SET", "SKU-COFFEE-1KG")


def page(api: Api, session_id: str, **arguments) -> dict:
    response = api.call(session_id, "get_draft", arguments)
    assert response.status_code == 200 and response.json()["outcome"] == "succeeded", response.text
    return response.json()["result"]


def test_line_317_of_a_500_line_draft_is_changed_through_the_rules_model(requester: Api):
    session_id = requester.new_session()
    lines = [{"sku": SKUS[n * 7 % 5], "qty": 1 + n * 3 % 11} for n in range(500)]
    created = requester.call(session_id, "create_order_draft", {"customer_id": "C-1001", "lines": lines[:200]})
    assert created.status_code == 200 and created.json()["outcome"] == "succeeded", created.text
    draft_id = created.json()["result"]["draft_id"]
    for revision, line in enumerate(lines[200:], start=1):
        added = requester.call(session_id, "add_draft_line", {"draft_id": draft_id, "base_revision": revision, **line})
        assert added.status_code == 200 and added.json()["outcome"] == "succeeded", added.text
    before = page(requester, session_id, draft_id=draft_id, offset=316, limit=1)
    assert (before["revision"], before["line_count"]) == (301, 500)
    assert before["lines"] == [{**before["lines"][0], "item_number": 317, **lines[316]}]

    run_id = start_run(requester, session_id, "change line 317 to quantity 2")
    events = run_events(requester, session_id, run_id, timeout=60)

    started = [e["data"] for e in events if e["type"] == "tool_started"]
    assert [s["tool"] for s in started] == ["get_order_task", "update_draft_line"], assistant_texts(events)
    assert started[1]["arguments"] == {"draft_id": draft_id, "base_revision": 301, "item_number": 317,
                                       "expected_sku": lines[316]["sku"], "qty": 2}
    assert events[-1]["type"] == "run_finished" and "500 line(s)" in assistant_texts(events)[-1]
    after = page(requester, session_id, draft_id=draft_id, offset=315, limit=3)
    assert after["revision"] == 302 and [x["qty"] for x in after["lines"]] == [lines[315]["qty"], 2,
                                                                                lines[317]["qty"]]
    assert after["line_count"] == 500 and after["total_amount_minor"] == page(
        requester, session_id, draft_id=draft_id)["total_amount_minor"]
