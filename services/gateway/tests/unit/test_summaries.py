"""The console's one rendering of a result: by the tool's result kind, on the server, carried on the stream."""

from __future__ import annotations

import pytest

from erpilot_gateway.summaries import result_summary, with_summary

pytestmark = pytest.mark.unit

CREDIT = {"credit_note_id": "CN-9101", "order_id": "O-5101", "amount_minor": 2500, "currency": "EUR",
          "reason": "late delivery", "remaining_minor": 7500}
ORDER = {"order_id": "O-5101", "status": "placed", "total_amount_minor": 10000, "paid_minor": 10000,
         "currency": "EUR"}


def test_a_credit_note_reads_as_a_credit_note_not_as_its_order():
    assert result_summary("issue_credit_note", CREDIT) == (
        "Credit note CN-9101 of 25.00 EUR on order O-5101; 75.00 EUR remains creditable")


def test_each_result_kind_has_its_line():
    refund = {"refund_id": "R-7101", "order_id": "O-5101", "amount_minor": 100, "currency": "EUR",
              "remaining_minor": 9900}
    assert result_summary("refund_payment", refund) == (
        "Refund R-7101 of 1.00 EUR on order O-5101; 99.00 EUR remains refundable")
    assert result_summary("cancel_order", ORDER).startswith("Order O-5101 · placed · total 100.00 EUR")
    assert result_summary("adjust_stock", {"sku": "SKU-1", "on_hand": 7}) == "SKU-1: on hand now 7"
    assert result_summary("get_order_task", {"status": "none"}) == "No open draft"
    assert result_summary("search_products", {"items": [{}, {}]}) == "2 item(s)"


def test_the_kind_comes_from_the_tool_not_from_what_the_result_says_it_is():
    # an order-shaped result of a credit note tool is not summarised as an order, nor a credit note as one
    assert not result_summary("issue_credit_note", ORDER).startswith("Order")
    assert not result_summary("get_order", CREDIT).startswith("Credit note")


def test_a_finished_call_on_the_stream_carries_its_summary_when_its_start_was_seen():
    tools: dict[str, str] = {}
    started = {"type": "tool_started", "data": {"call_id": "c1", "tool": "issue_credit_note", "arguments": {}}}
    finished = {"type": "tool_finished", "data": {"call_id": "c1", "outcome": "succeeded", "result": CREDIT}}
    assert with_summary(started, tools) == started
    assert with_summary(finished, tools)["data"]["summary"].startswith("Credit note CN-9101")
    unseen = {"type": "tool_finished", "data": {"call_id": "c2", "outcome": "succeeded", "result": CREDIT}}
    assert "summary" not in with_summary(unseen, tools)["data"]  # no guess for a call whose start it did not see
    omitted = {"type": "tool_finished", "data": {"call_id": "c1", "outcome": "succeeded",
                                                 "result": {"omitted": True, "href": "/x"}}}
    assert "summary" not in with_summary(omitted, tools)["data"]
