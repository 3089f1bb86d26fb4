"""The agent's projections and summaries of a result pick their shape by the tool's result kind (a catalog trait):
a new write tool of a known kind is projected, described and re-read without a line naming it."""

from __future__ import annotations

import pytest

from erpilot_agent.domain.erp_projection import project_erp_result, reread_call, summarise_result
from erpilot_agent.domain.rules_summary import describe_result

pytestmark = pytest.mark.unit

CREDIT = {"credit_note_id": "CN-9101", "order_id": "O-5101", "amount_minor": 2500, "currency": "EUR",
          "reason": "late delivery " * 50, "remaining_minor": 7500}


def test_a_credit_note_is_projected_as_a_document_keeping_its_id_and_amounts():
    assert summarise_result("issue_credit_note", CREDIT) == {
        "credit_note_id": "CN-9101", "order_id": "O-5101", "amount_minor": 2500, "currency": "EUR",
        "remaining_minor": 7500}
    projected = project_erp_result("issue_credit_note", {"status": "succeeded", "result": CREDIT})
    assert projected is not None and projected["result"]["credit_note_id"] == "CN-9101"
    assert projected["refresh_required"] is True


def test_a_credit_note_is_described_and_re_read_through_its_order():
    assert describe_result("issue_credit_note", CREDIT) == (
        "Credit note CN-9101 of 25.00 EUR on order O-5101; 75.00 EUR remains creditable.")
    assert reread_call("issue_credit_note", {"order_id": "O-5101"}, CREDIT) == {
        "tool": "get_order", "arguments": {"order_id": "O-5101"}}


def test_a_refund_keeps_its_own_words_and_keys():
    refund = {"refund_id": "R-1", "order_id": "O-1", "amount_minor": 100, "currency": "EUR", "remaining_minor": 0,
              "channel": "original"}
    assert summarise_result("refund_payment", refund) == {k: v for k, v in refund.items() if k != "channel"}
    assert describe_result("refund_payment", refund).endswith("0.00 EUR remains refundable.")


def test_an_unknown_tool_is_not_projected():
    assert summarise_result("no_such_tool", CREDIT) is None
