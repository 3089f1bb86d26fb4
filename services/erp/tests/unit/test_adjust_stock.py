from __future__ import annotations

import pytest

from erpilot_contracts.erp.v1 import PreviewV1
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.plans import StockChange

pytestmark = pytest.mark.unit


def rejected(code: str):
    return pytest.raises(BusinessError, match=rf"^{code}: ")


def args(delta: int, sku: str = "SKU-B") -> dict:
    return {"sku": sku, "delta": delta, "reason": "stocktake"}


def test_preview_shows_on_hand_before_and_after(catalog):
    preview = catalog.prepare("adjust_stock", args(-3), catalog.state(), catalog.now).preview
    assert preview["operation"] == "Adjust stock"
    assert preview["object"] == "Product SKU-B"
    assert preview["target"] == "Widget B"
    assert preview["effects"] == [{"label": "on hand SKU-B", "before": 5, "after": 2, "unit": "pcs"}]
    assert preview["notes"] == ["Remove 3 unit(s).", "Reason: stocktake"]
    assert preview["details"]["delta"] == -3
    assert preview["amount_minor"] is None
    PreviewV1.model_validate(preview)


def test_facts_record_before_and_after(catalog):
    facts = catalog.prepare("adjust_stock", args(7), catalog.state(), catalog.now).facts
    assert facts == {"sku": "SKU-B", "on_hand_before": 5, "on_hand_after": 12}


def test_going_below_zero_is_refused_at_prepare(catalog):
    assert catalog.prepare("adjust_stock", args(-5), catalog.state(), catalog.now).facts["on_hand_after"] == 0
    with rejected("insufficient_stock"):
        catalog.prepare("adjust_stock", args(-6), catalog.state(), catalog.now)


def test_unknown_product_is_not_found(catalog):
    with rejected("not_found"):
        catalog.prepare("adjust_stock", args(1, sku="SKU-NOPE"), catalog.state(), catalog.now)


def test_discontinued_products_can_still_be_counted(catalog):
    facts = catalog.prepare("adjust_stock", args(-3, sku="SKU-OLD"), catalog.state(), catalog.now).facts
    assert facts["on_hand_after"] == 0


def test_commit_applies_the_delta_and_returns_the_product(catalog):
    facts = catalog.prepare("adjust_stock", args(-3), catalog.state(), catalog.now).facts
    plan = catalog.commit("adjust_stock", args(-3), catalog.stored(facts), catalog.state(), catalog.now)
    assert plan.effects == (StockChange("SKU-B", 5, 2),)
    assert plan.result == {"sku": "SKU-B", "name": "Widget B", "status": "active", "price_minor": 250,
                           "currency": "EUR", "on_hand": 2}


@pytest.mark.parametrize("on_hand", [4, 6])
def test_commit_after_stock_moved_is_stock_changed(catalog, on_hand):
    facts = catalog.prepare("adjust_stock", args(2), catalog.state(), catalog.now).facts
    catalog.change("SKU-B", on_hand=on_hand)
    with rejected("stock_changed"):
        catalog.commit("adjust_stock", args(2), facts, catalog.state(), catalog.now)


def test_commit_never_leaves_stock_negative(catalog):
    facts = {"sku": "SKU-B", "on_hand_before": 5, "on_hand_after": -1}  # a preview that should never exist
    with rejected("insufficient_stock"):
        catalog.commit("adjust_stock", args(-6), facts, catalog.state(), catalog.now)


def test_commit_for_a_vanished_product_is_not_found(catalog):
    facts = catalog.prepare("adjust_stock", args(1), catalog.state(), catalog.now).facts
    del catalog.products["SKU-B"]
    with rejected("not_found"):
        catalog.commit("adjust_stock", args(1), facts, catalog.state(), catalog.now)
