"""What the approval page prints for amounts, effects and outcomes (no browser needed)."""

from __future__ import annotations

from typing import Any

import pytest

from erpilot_contracts.approval.v1 import ApprovalRecordV1
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_gateway.console import views
from erpilot_platform.testing.previews import preview as a_preview
from erpilot_platform.testing.previews import preview_json


def _record(**fields: Any) -> ApprovalRecordV1:
    """An approval record as the approval service answers it, with ``fields`` over plain defaults."""
    return ApprovalRecordV1.model_validate({
        "pending_id": "P-1", "call_id": "c-1", "session_id": "s-1", "tool": "submit_order", "arguments": {},
        "fingerprint": "f", "operation_id": "op-1", "risk": "high", "preview": preview_json(),
        "required_roles": ["manager"], "requested_by": "alice", "created_at": "2026-10-19T11:00:00Z",
        "expires_at": "2026-10-19T12:15:00Z", "status": "pending", "policy_version": "v1", **fields})


def _operation(**fields: Any) -> OperationStatusV1:
    return OperationStatusV1.model_validate({"operation_id": "op-1", "tool": "submit_order", **fields})


@pytest.mark.parametrize(("minor", "currency", "shown"), [
    (123450, "EUR", "1,234.50 EUR"), (5, "EUR", "0.05 EUR"), (0, "USD", "0.00 USD"),
    (-1999, "EUR", "-19.99 EUR"), (100000000, "CHF", "1,000,000.00 CHF"), (None, "EUR", ""),
])
def test_money_is_major_units_with_two_decimals_and_the_code(minor, currency, shown):
    assert views.money(minor, currency) == shown


def test_a_float_or_string_amount_is_shown_as_given_never_reinterpreted():
    assert views.money(12.5, "EUR") == "12.5"
    assert views.money("1250", "EUR") == "1250"


@pytest.mark.parametrize(("minor", "currency", "shown"), [
    (123450, "JPY", "123,450 JPY"), (1234, "KWD", "1.234 KWD"), (5, "BHD", "0.005 BHD"), (5, None, "0.05"),
])
def test_money_uses_the_iso_exponent_where_a_currency_has_other_than_two_decimals(minor, currency, shown):
    assert views.money(minor, currency) == shown


def test_effects_are_shown_in_the_unit_the_erp_gave_and_nothing_is_guessed_from_labels():
    preview = a_preview(currency="EUR", effects=[
        {"label": "refundable remaining", "before": 12300, "after": 2300, "unit": "EUR"},
        {"label": "stock SKU-1", "before": 1200, "after": 8, "unit": "pcs"},
        {"label": "status", "before": "placed", "after": "cancelled", "unit": None},
        {"label": "refunded total", "before": 500, "after": 1500}])  # no unit: a bare number, never money
    assert views.effect_rows(preview) == [
        {"label": "refundable remaining", "before": "123.00 EUR", "after": "23.00 EUR", "unit": "EUR"},
        {"label": "stock SKU-1", "before": "1,200 pcs", "after": "8 pcs", "unit": "pcs"},
        {"label": "status", "before": "placed", "after": "cancelled", "unit": ""},
        {"label": "refunded total", "before": "500", "after": "1500", "unit": ""}]


def test_the_reason_a_person_cannot_decide_is_said_in_words():
    assert "separation of duties" in views.cannot_decide_text("separation_of_duties", ["manager"], ["manager"])
    role = views.cannot_decide_text("role", ["manager"], ["approver", "requester"])
    assert role.endswith("it needs one of manager; you hold approver, requester.")
    assert views.cannot_decide_text(None, ["manager"], ["manager"]) == ""


def test_the_decision_time_is_kept_as_iso_for_the_viewers_time_zone():
    decided = views.decision_view(_record(status="approved", decided_by="bob", decided_at="2026-10-19T12:00:00Z"))
    assert (decided["headline"], decided["at"], decided["at_text"]) == (
        "Approved by bob", "2026-10-19T12:00:00.000+00:00", "2026-10-19 12:00:00 UTC")
    expired = views.decision_view(_record(status="expired", expires_at="2026-10-19T12:15:00+00:00"))
    assert (expired["headline"], expired["at_text"]) == ("Expired without a decision", "2026-10-19 12:15:00 UTC")
    assert views.decision_view(_record(status="pending"))["at"] == ""


def test_the_outcome_tells_approved_from_done_and_business_rejected_from_not_executed():
    approved = _record(status="approved", tool="submit_order")
    assert views.outcome_view(_record(status="pending"), None) is None
    assert views.outcome_view(approved, _operation(status="prepared"))["state"] == "waiting"
    done = views.outcome_view(approved, _operation(status="committed", result={
        "order_id": "O-1", "status": "placed", "total_amount_minor": 1098, "currency": "EUR"}))
    assert done["state"] == "done" and done["detail"] == "Order O-1 · placed · total 10.98 EUR"
    rejected = views.outcome_view(approved, _operation(status="rejected", error={"code": "stock_changed",
                                                                                  "message": "m"}))
    assert (rejected["state"], rejected["detail"]) == ("business_rejected", "stock_changed: m")
    assert views.outcome_view(approved, _operation(status="rejected"))["detail"] == "rejected"
    assert views.outcome_view(_record(status="rejected"), None)["state"] == "not_executed"
    assert views.outcome_view(_record(status="expired"), None)["state"] == "not_executed"


def test_a_quorum_is_shown_with_its_votes_in_iso_and_utc():
    record = _record(approvals_required=2, approvals_received=1, votes=[
        {"sub": "bob", "role": "manager", "action": "approve", "at": "2026-10-19T12:00:00Z"}])
    assert views.quorum_view(record) == {"approvals_required": 2, "approvals_received": 1, "votes": [
        {"sub": "bob", "on_behalf_of": "", "who": "bob", "role": "manager", "action": "approve",
         "at": "2026-10-19T12:00:00.000+00:00", "at_text": "2026-10-19 12:00:00 UTC", "comment": ""}]}


def test_a_delegates_vote_and_decision_read_as_decided_by_ana_for_bob():
    record = _record(status="approved", decided_by="ana", decided_on_behalf_of="bob",
                     decided_at="2026-10-19T12:00:00Z", votes=[
                         {"sub": "ana", "role": "manager", "action": "approve", "at": "2026-10-19T12:00:00Z",
                          "on_behalf_of": "bob"}])
    assert views.decision_view(record)["headline"] == "Approved by ana for bob"
    assert [(v["who"], v["on_behalf_of"]) for v in views.quorum_view(record)["votes"]] == [("ana for bob", "bob")]
    assert views.decision_view(_record(status="approved", decided_by="max",
                                       decided_at="2026-10-19T12:00:00Z"))["headline"] == "Approved by max"


def test_minor_unit_details_are_shown_as_money_in_the_previews_currency():
    details = {"order_id": "O-1", "order_status": "placed", "paid_minor": 1647, "refunded_minor": 0,
               "total_amount_minor": 1647, "channel": "original"}
    assert views.other_details(details, "EUR") == [
        {"label": "order id", "value": "O-1"}, {"label": "order status", "value": "placed"},
        {"label": "paid", "value": "16.47 EUR"}, {"label": "refunded", "value": "0.00 EUR"},
        {"label": "total amount", "value": "16.47 EUR"}, {"label": "channel", "value": "original"}]
    yen = views.other_details({"paid_minor": 4200, "currency": "JPY"}, "EUR")  # the details' own currency wins
    assert yen == [{"label": "paid", "value": "4,200 JPY"}, {"label": "currency", "value": "JPY"}]
    assert views.other_details({"paid_minor": 1647}, None) == [{"label": "paid minor", "value": "1647"}]
