"""A long draft, created through the API and edited by line number through the rules model (issue 17).

The model sees the session's open draft only through the context view: a 200-line draft is too long
for ERPILOT_CONTEXT_TOOL_BYTES even as a summary (about 9 kB), so it is shown compactly with the line
the person named, and the planner sends that line's SKU as ``expected_sku``; before, the whole result
was replaced by the omitted marker. ``get_draft`` pages read the result back.

200 lines is the most one ``create_order_draft`` takes; 500 lines need 300 more ``add_draft_line``
calls, each returning the whole revision, so the session's stored results grow with the square of the
length. The session view (``GET /v1/sessions/{sid}``) therefore shows a result over 16 KiB of compact
JSON as an ``omitted`` marker naming the call's URL, where it is whole; and the SSE route checks the
owner with the session's summary only (``GetSessionV1.summary_only``), not the whole view. Before, both
answered 503 on such a session (the view exceeded NATS ``max_payload``).
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


def test_line_417_of_a_500_line_draft_is_changed_through_the_rules_model(requester: Api):
    session_id = requester.new_session()
    lines = [{"sku": SKUS[n * 7 % 5], "qty": 3 + n * 3 % 11} for n in range(500)]
    created = requester.call(session_id, "create_order_draft", {"customer_id": "C-1001", "lines": lines[:200]})
    assert created.status_code == 200 and created.json()["outcome"] == "succeeded", created.text
    draft_id = created.json()["result"]["draft_id"]
    for revision, line in enumerate(lines[200:], start=1):
        added = requester.call(session_id, "add_draft_line", {"draft_id": draft_id, "base_revision": revision, **line})
        assert added.status_code == 200 and added.json()["outcome"] == "succeeded", added.text
    last_call_id = added.json()["call_id"]
    before = page(requester, session_id, draft_id=draft_id, offset=416, limit=1)
    assert (before["revision"], before["line_count"]) == (301, 500)
    assert before["lines"] == [{**before["lines"][0], "item_number": 417, **lines[416]}]

    view = requester.get(f"/v1/sessions/{session_id}")
    assert view.status_code == 200, view.text
    body = view.json()
    assert len(body["tool_calls"]) == 302 and body["run_status"] == "idle"
    last = next(c for c in body["tool_calls"] if c["call_id"] == last_call_id)
    marker = last["result"]
    assert marker["omitted"] is True and marker["reason"] == "result_too_large" and marker["limit_bytes"] == 16384
    assert marker["size_bytes"] > 16384 and marker["href"] == f"/v1/sessions/{session_id}/tool-calls/{last_call_id}"
    whole = requester.get(marker["href"])
    assert whole.status_code == 200 and whole.json()["result"]["revision"] == 301, whole.text
    assert len(whole.json()["result"]["lines"]) == 500
    small = next(c for c in body["tool_calls"] if c["tool"] == "get_draft")
    assert small["result"] == before  # a page of one line is under the bound: whole in the view

    run_id = start_run(requester, session_id, "change line 417 to quantity 2")
    events = requester.events(session_id, last_event_id=body["last_seq"], timeout=60,
                              until=lambda es: any(e["type"] in ("run_finished", "run_failed") for e in es))
    assert events[0]["seq"] == body["last_seq"] + 1 and events[0]["type"] in ("message", "run_started")
    started = [e["data"] for e in events if e["type"] == "tool_started"]
    assert [s["tool"] for s in started] == ["get_order_task", "update_draft_line"], assistant_texts(events)
    assert started[1]["arguments"] == {"draft_id": draft_id, "base_revision": 301, "item_number": 417,
                                       "expected_sku": lines[416]["sku"], "qty": 2}
    assert events[-1]["type"] == "run_finished" and events[-1]["data"]["run_id"] == run_id
    assert "update_draft_line succeeded" in assistant_texts(events)[-1]
    after = page(requester, session_id, draft_id=draft_id, offset=415, limit=3)
    assert after["revision"] == 302 and [x["qty"] for x in after["lines"]] == [lines[415]["qty"], 2,
                                                                              lines[417]["qty"]]
    assert after["line_count"] == 500 and page(requester, session_id, draft_id=draft_id, offset=490)["lines"][-1][
        "item_number"] == 500
