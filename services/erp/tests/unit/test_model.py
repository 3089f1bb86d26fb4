from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from erpilot_erp.domain.errors import BusinessError, ErrorCode, not_found
from erpilot_erp.domain.model import Customer, Product, Refund
from erpilot_erp.domain.operations import business_codes

pytestmark = pytest.mark.unit


def test_product_result_has_exactly_the_spec_fields(catalog):
    assert catalog.products["SKU-A"].to_result() == {
        "sku": "SKU-A", "name": "Widget A", "status": "active", "price_minor": 1000, "currency": "EUR",
        "on_hand": 12,
    }


def test_customer_result_has_exactly_the_spec_fields():
    assert Customer("C-9", "Gamma Großhandel KG", 5).to_result() == {
        "customer_id": "C-9", "name": "Gamma Großhandel KG", "discount_pct": 5,
    }


def test_order_result_carries_lines_money_and_customer(catalog):
    result = catalog.order(refunded_minor=500).to_result()
    assert result["order_id"] == "O-1"
    assert result["status"] == "placed"
    assert result["lines"] == [
        {"sku": "SKU-A", "name": "Widget A", "qty": 2, "unit_price_minor": 1000, "line_total_minor": 2000},
        {"sku": "SKU-B", "name": "Widget B", "qty": 4, "unit_price_minor": 250, "line_total_minor": 1000},
    ]
    assert (result["total_amount_minor"], result["currency"]) == (3000, "EUR")
    assert (result["paid_minor"], result["refunded_minor"]) == (3000, 500)
    assert (result["customer_id"], result["customer_name"]) == ("C-1", "Alpha Trading GmbH")
    assert result["created_at"] == "2026-09-28T12:00:00+00:00"
    json.dumps(result)


def test_order_remaining_is_paid_minus_refunded(catalog):
    assert catalog.order(refunded_minor=1200).remaining_minor == 1800


def test_refund_result_has_exactly_the_spec_fields():
    refund = Refund("R-1", "O-1", 700, "EUR", "original", 2300, datetime(2026, 10, 1, tzinfo=UTC))
    assert refund.to_result() == {
        "refund_id": "R-1", "order_id": "O-1", "amount_minor": 700, "currency": "EUR",
        "remaining_minor": 2300,
    }


def test_draft_result_names_every_spec_field(catalog):
    draft = catalog.create([("SKU-A", 2), ("SKU-B", 3)], customer_id="C-2", note="deliver to gate 4")
    result = draft.to_result()
    assert set(result) == {
        "draft_id", "revision", "status", "customer_id", "customer_name", "lines", "total_amount_minor",
        "currency", "note", "valid_until", "created_at",
    }
    assert set(result["lines"][0]) == {
        "item_number", "sku", "name", "qty", "unit_price_minor", "discount_pct", "line_total_minor",
        "stock_before",
    }
    assert result["customer_name"] == "Beta Bau Aktiengesellschaft"
    assert result["valid_until"] == "2026-10-02T12:00:00+00:00"
    assert "session_id" not in result
    json.dumps(result)


def test_draft_candidate_shape(catalog):
    assert catalog.create().to_candidate() == {
        "draft_id": "D-1", "revision": 1, "customer_id": "C-1", "total_amount_minor": 2000,
    }


def test_records_are_immutable(catalog):
    draft = catalog.create()
    with pytest.raises(dataclasses.FrozenInstanceError):
        draft.revision = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        draft.lines[0].qty = 99  # type: ignore[misc]
    assert isinstance(draft.lines, tuple)


def test_with_on_hand_returns_a_new_product(catalog):
    product = catalog.products["SKU-A"]
    assert product.with_on_hand(3).on_hand == 3
    assert product.on_hand == 12
    assert isinstance(product, Product)


def test_business_error_codes_are_the_documented_set():
    # The shared codes and each write tool's own (declared in its module), once each.
    values = [code.value for code in business_codes()]
    assert len(values) == len(set(values))
    assert set(values) == {
        "not_found", "draft_changed", "sku_mismatch", "line_not_found", "product_unavailable",
        "currency_mismatch", "draft_closed", "draft_empty", "quote_changed", "stock_changed", "quote_expired",
        "order_changed",
        "refund_exceeds_remaining", "credit_exceeds_remaining", "insufficient_stock",
    }
    for code in business_codes():
        assert len(code.meaning) > 20, f"{code.value} is undocumented"
    for code in ErrorCode:
        assert code == code.value


def test_business_error_carries_code_message_and_details():
    error = BusinessError(ErrorCode.STOCK_CHANGED, "moved", sku="SKU-A")
    assert (error.code, error.message) == ("stock_changed", "moved")
    assert error.to_error() == {"code": "stock_changed", "message": "moved", "details": {"sku": "SKU-A"}}
    late = BusinessError(ErrorCode.QUOTE_EXPIRED, "late")
    assert late.to_error() == {"code": "quote_expired", "message": "late"}


def test_not_found_names_kind_and_id():
    error = not_found("order", "O-9")
    assert error.code == "not_found"
    assert error.message == "order O-9 not found"
