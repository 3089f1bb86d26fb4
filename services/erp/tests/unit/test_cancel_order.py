from __future__ import annotations

import pytest

from erpilot_contracts.erp.v1 import PreviewV1
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.plans import NewRefund, OrderChange, StockChange

pytestmark = pytest.mark.unit


def rejected(code: str):
    return pytest.raises(BusinessError, match=rf"^{code}: ")


ARGS = {"order_id": "O-1", "reason": "customer changed their mind"}


def test_preview_shows_status_stock_returned_and_that_nothing_is_refunded(catalog):
    preview = catalog.prepare("cancel_order", ARGS, catalog.state(order=catalog.order()), catalog.now).preview
    assert preview["operation"] == "Cancel order"
    assert preview["object"] == "Order O-1"
    assert preview["target"] == "Alpha Trading GmbH"
    assert (preview["amount_minor"], preview["currency"]) == (3000, "EUR")
    assert preview["effects"] == [
        {"label": "status", "before": "placed", "after": "cancelled", "unit": None},
        {"label": "stock SKU-A", "before": 12, "after": 14, "unit": "pcs"},
        {"label": "stock SKU-B", "before": 5, "after": 9, "unit": "pcs"},
    ]
    assert preview["notes"][0].startswith("No refund is issued")
    assert "30.00 EUR" in preview["notes"][0]
    assert "Reason: customer changed their mind" in preview["notes"]
    assert preview["details"]["reason"] == "customer changed their mind"
    PreviewV1.model_validate(preview)


def test_facts_record_status_refunds_and_quantities(catalog):
    state = catalog.state(order=catalog.order())
    facts = catalog.prepare("cancel_order", {"order_id": "O-1"}, state, catalog.now).facts
    assert facts == {"order_id": "O-1", "status": "placed", "refunded_minor": 0,
                     "returned_qty": {"SKU-A": 2, "SKU-B": 4}}


def test_unknown_order_is_not_found(catalog):
    with rejected("not_found"):
        catalog.prepare("cancel_order", ARGS, catalog.state(order=None), catalog.now)


def test_an_order_that_is_not_placed_cannot_be_cancelled(catalog):
    with rejected("order_changed"):
        catalog.prepare("cancel_order", ARGS, catalog.state(order=catalog.order(status="cancelled")), catalog.now)


def test_commit_cancels_returns_stock_and_refunds_nothing(catalog):
    order = catalog.order()
    facts = catalog.prepare("cancel_order", ARGS, catalog.state(order=order), catalog.now).facts
    catalog.change("SKU-A", on_hand=20)  # stock moved meanwhile: returning quantities still adds up right
    plan = catalog.commit("cancel_order", ARGS, catalog.stored(facts), catalog.state(order=order), catalog.now)
    [change] = plan.of(OrderChange)
    assert change.order.status == "cancelled"
    assert (change.order.paid_minor, change.order.refunded_minor) == (3000, 0)
    assert plan.of(StockChange) == (StockChange("SKU-A", 20, 22), StockChange("SKU-B", 5, 9))
    assert plan.of(NewRefund) == ()
    assert plan.result == change.order.to_result()
    assert plan.result["status"] == "cancelled"


def test_commit_of_an_order_cancelled_meanwhile_is_order_changed(catalog):
    facts = catalog.prepare("cancel_order", ARGS, catalog.state(order=catalog.order()), catalog.now).facts
    with rejected("order_changed"):
        catalog.commit("cancel_order", ARGS, facts, catalog.state(order=catalog.order(status="cancelled")),
               catalog.now)


def test_commit_of_an_order_refunded_meanwhile_is_order_changed(catalog):
    facts = catalog.prepare("cancel_order", ARGS, catalog.state(order=catalog.order()), catalog.now).facts
    with rejected("order_changed"):
        catalog.commit("cancel_order", ARGS, facts, catalog.state(order=catalog.order(refunded_minor=100)),
               catalog.now)


def test_commit_of_a_vanished_order_is_not_found(catalog):
    facts = catalog.prepare("cancel_order", ARGS, catalog.state(order=catalog.order()), catalog.now).facts
    with rejected("not_found"):
        catalog.commit("cancel_order", ARGS, facts, catalog.state(order=None), catalog.now)


def test_a_line_whose_product_is_missing_is_not_found(catalog):
    del catalog.products["SKU-B"]
    with rejected("not_found"):
        catalog.prepare("cancel_order", ARGS, catalog.state(order=catalog.order()), catalog.now)
