"""A long draft, created through the API and edited by line number through the rules model (issue 17).

The model sees the session's open draft only through the context view: a 200-line draft is too long
for ERPILOT_CONTEXT_TOOL_BYTES even as a summary (about 9 kB), so it is shown compactly with the line
the person named, and the planner sends line 117's SKU as ``expected_sku``; before, the whole result
was replaced by the omitted marker. ``get_draft`` pages read the result back.

200 lines is the most one ``create_order_draft`` takes; 500 lines need 300 more ``add_draft_line``
calls, whose full revisions make the session's stored results too large for the session view the
gateway asks for before streaming events. The 500-line case is covered below the gateway:
``services/erp/tests/integration/test_views.py`` (pages and the edit over NATS) and
``services/agent/tests/unit/test_large_draft_flow.py`` (the rules model on the context view).
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


def test_line_117_of_a_200_line_draft_is_changed_through_the_rules_model(requester: Api):
    session_id = requester.new_session()
    lines = [{"sku": SKUS[n * 7 % 5], "qty": 3 + n * 3 % 11} for n in range(200)]
    created = requester.call(session_id, "create_order_draft", {"customer_id": "C-1001", "lines": lines})
    assert created.status_code == 200 and created.json()["outcome"] == "succeeded", created.text
    draft_id = created.json()["result"]["draft_id"]
    before = page(requester, session_id, draft_id=draft_id, offset=116, limit=1)
    assert (before["revision"], before["line_count"]) == (1, 200)
    assert before["lines"] == [{**before["lines"][0], "item_number": 117, **lines[116]}]

    run_id = start_run(requester, session_id, "change line 117 to quantity 2")
    events = run_events(requester, session_id, run_id, timeout=60)

    begun = next(i for i, e in enumerate(events) if e["type"] == "run_started" and e["data"]["run_id"] == run_id)
    started = [e["data"] for e in events[begun:] if e["type"] == "tool_started"]  # not the API's own calls
    assert [s["tool"] for s in started] == ["get_order_task", "update_draft_line"], assistant_texts(events)
    assert started[1]["arguments"] == {"draft_id": draft_id, "base_revision": 1, "item_number": 117,
                                       "expected_sku": lines[116]["sku"], "qty": 2}
    assert events[-1]["type"] == "run_finished" and "200 line(s)" in assistant_texts(events)[-1]
    after = page(requester, session_id, draft_id=draft_id, offset=115, limit=3)
    assert after["revision"] == 2 and [x["qty"] for x in after["lines"]] == [lines[115]["qty"], 2,
                                                                              lines[117]["qty"]]
    assert after["line_count"] == 200 and after["total_amount_minor"] == page(
        requester, session_id, draft_id=draft_id)["total_amount_minor"]
