"""A 500-line draft edited by line number through the model (the rules planner reading the context view).

The ERP is a small in-memory stand-in with the result shapes of SPEC §2 (get_order_task, get_draft with
offset/limit, update_draft_line); what is under test is that the model, seeing only the budgeted view,
finds the draft, the revision and line 317's SKU, and can page through the lines afterwards.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from erpilot_agent.domain.context_view import build_context
from erpilot_agent.domain.history import assistant_message, entry_bytes, system_message, tool_message, user_message
from erpilot_agent.domain.rules_planner import plan

pytestmark = pytest.mark.unit


class Ledger:
    """One open draft of 500 lines; every edit makes a new revision."""

    def __init__(self, line_count: int = 500):
        self.revision = 1
        self.lines = []
        for n in range(1, line_count + 1):
            digest = hashlib.sha256(f"{n}".encode()).hexdigest()
            self.lines.append({"item_number": n, "sku": f"SKU-{digest[:6].upper()}", "name": f"Part {n} " * 4,
                               "qty": int(digest[6:9], 16) % 50 + 1, "unit_price_minor": 250, "discount_pct": 0,
                               "line_total_minor": 0, "stock_before": 900})

    def draft(self) -> dict:
        for line in self.lines:
            line["line_total_minor"] = line["qty"] * line["unit_price_minor"]
        return {"draft_id": "D-1001", "revision": self.revision, "status": "open", "customer_id": "C-1001",
                "customer_name": "Nordwind Handelsgesellschaft mbH", "lines": [dict(x) for x in self.lines],
                "total_amount_minor": sum(x["line_total_minor"] for x in self.lines), "currency": "EUR",
                "note": None, "valid_until": "2026-12-02T00:00:00+00:00"}

    def run(self, tool: str, args: dict) -> dict:
        if tool == "get_order_task":
            return {"status": "succeeded", "result": {"status": "ok", "draft": self.draft()}}
        if tool == "get_draft":
            result = {**self.draft(), "line_count": len(self.lines)}
            if "offset" in args or "limit" in args:
                start = args.get("offset", 0)
                result.update(lines=result["lines"][start:start + args.get("limit", len(self.lines))],
                              offset=start, limit=args.get("limit"))
            return {"status": "succeeded", "result": result}
        assert tool == "update_draft_line", tool
        line = self.lines[args["item_number"] - 1]
        if args["base_revision"] != self.revision or line["sku"] != args["expected_sku"]:
            return {"status": "business_rejected", "error": {"code": "sku_mismatch", "message": "no"}}
        line["qty"] = args["qty"]
        self.revision += 1
        return {"status": "succeeded", "result": self.draft()}


def converse(ledger: Ledger, history: list[dict], text: str, views: list[list[dict]]) -> str:
    """One user message: ask the planner (on the view) until it answers; returns its answer."""
    history.append(user_message(text))
    for _ in range(5):
        view = build_context([system_message("rules"), *history])
        views.append(view)
        reply = plan(view)
        if not reply.tool_calls:
            history.append(assistant_message(reply.text))
            return reply.text
        history.append(assistant_message(None, reply.tool_calls))
        for called in reply.tool_calls:
            history.append(tool_message(called["id"], ledger.run(called["name"], called["arguments"])))
    raise AssertionError("the planner did not finish")


def test_line_317_of_a_500_line_draft_is_changed_by_its_number_and_read_back_by_page():
    ledger, history, views = Ledger(), [], []
    sku_317, qty_317 = ledger.lines[316]["sku"], ledger.lines[316]["qty"]

    answer = converse(ledger, history, "change line 317 to quantity 2", views)

    assert "update_draft_line succeeded" in answer and "500 line(s)" in answer
    assert ledger.revision == 2 and ledger.lines[316]["qty"] == 2
    [update] = [c for m in history for c in m.get("tool_calls") or [] if c["function"]["name"] == "update_draft_line"]
    assert json.loads(update["function"]["arguments"]) == {
        "draft_id": "D-1001", "base_revision": 1, "item_number": 317, "expected_sku": sku_317, "qty": 2}
    seen_task = json.loads([m for m in views[1] if m["role"] == "tool"][-1]["content"])
    assert seen_task["result"]["draft"]["lines"] == [{"item_number": 317, "sku": sku_317, "qty": qty_317}]
    assert seen_task["result"]["draft"]["line_count"] == 500
    assert all(entry_bytes(m) <= 4096 + 200 for view in views for m in view if m["role"] == "tool")

    answer = converse(ledger, history, "show draft D-1001 lines 315-318", views)
    assert f"317. {sku_317} x2" in answer and "500 line(s)" in answer


def test_a_line_the_view_does_not_show_is_not_guessed():
    ledger, history = Ledger(), []
    history += [user_message("change line 12 to quantity 3")]
    # The task result as the model would see it if line 12 were not among the touched lines.
    history += [assistant_message(None, [{"id": "rules-1", "name": "get_order_task", "arguments": {}}]),
                tool_message("rules-1", {"status": "succeeded", "result": {"status": "ok", "draft": {
                    "draft_id": "D-1001", "revision": 1, "line_count": 500, "lines": []}}})]
    reply = plan([system_message("rules"), *history])
    assert reply.tool_calls == [] and "cannot see line 12" in reply.text and ledger.revision == 1
