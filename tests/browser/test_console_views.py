"""What the approval page prints for amounts, effects and outcomes (no browser needed)."""

from __future__ import annotations

import pytest

from erpilot_gateway.console import views


@pytest.mark.parametrize(("minor", "currency", "shown"), [
    (123450, "EUR", "1,234.50 EUR"), (5, "EUR", "0.05 EUR"), (0, "USD", "0.00 USD"),
    (-1999, "EUR", "-19.99 EUR"), (100000000, "CHF", "1,000,000.00 CHF"), (None, "EUR", ""),
])
def test_money_is_major_units_with_two_decimals_and_the_code(minor, currency, shown):
    assert views.money(minor, currency) == shown


def test_a_float_or_string_amount_is_shown_as_given_never_reinterpreted():
    assert views.money(12.5, "EUR") == "12.5"
    assert views.money("1250", "EUR") == "1250"


def test_money_effects_are_formatted_and_stock_effects_are_counts():
    preview = {"currency": "EUR", "effects": [{"label": "refundable remaining", "before": 12300, "after": 2300},
                                              {"label": "stock SKU-1", "before": 10, "after": 8}]}
    assert views.effect_rows(preview) == [
        {"label": "refundable remaining", "before": "123.00 EUR", "after": "23.00 EUR"},
        {"label": "stock SKU-1", "before": "10", "after": "8"}]


def test_the_outcome_tells_approved_from_done_and_business_rejected_from_not_executed():
    approved = {"status": "approved", "tool": "submit_order"}
    assert views.outcome_view({"status": "pending"}, None) is None
    assert views.outcome_view(approved, {"status": "prepared"})["state"] == "waiting"
    done = views.outcome_view(approved, {"status": "committed", "result": {
        "order_id": "O-1", "status": "placed", "total_amount_minor": 1098, "currency": "EUR"}})
    assert done["state"] == "done" and done["detail"] == "Order O-1 · placed · total 10.98 EUR"
    assert views.outcome_view(approved, {"status": "rejected", "error": {"code": "stock_changed", "message": "m"}}
                              )["state"] == "business_rejected"
    assert views.outcome_view({"status": "rejected"}, None)["state"] == "not_executed"
    assert views.outcome_view({"status": "expired"}, None)["state"] == "not_executed"
