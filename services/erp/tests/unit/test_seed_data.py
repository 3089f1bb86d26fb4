from __future__ import annotations

import re
from collections import Counter

import pytest

from erpilot_erp.domain import seed_data
from erpilot_erp.domain.pricing import line_total_minor

pytestmark = pytest.mark.unit

ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")  # the contracts' Id pattern


def test_thirty_products_in_eur_with_stable_unique_skus():
    skus = [p.sku for p in seed_data.SEED_PRODUCTS]
    assert len(skus) == 30 == len(set(skus))
    assert all(sku.startswith("SKU-") and ID.match(sku) for sku in skus)
    assert {p.currency for p in seed_data.SEED_PRODUCTS} == {"EUR"}
    assert all(type(p.price_minor) is int and p.price_minor > 0 for p in seed_data.SEED_PRODUCTS)


def test_some_products_are_discontinued_and_exactly_one_is_out_of_stock():
    statuses = Counter(p.status for p in seed_data.SEED_PRODUCTS)
    assert statuses["discontinued"] >= 2
    assert statuses["active"] + statuses["discontinued"] == 30
    assert [p.sku for p in seed_data.SEED_PRODUCTS if p.on_hand == 0] == [seed_data.ZERO_STOCK_SKU]
    assert all(p.on_hand >= 0 for p in seed_data.SEED_PRODUCTS)


def test_customers_have_full_names_and_one_has_a_discount_tier():
    customers = {c.customer_id: c for c in seed_data.SEED_CUSTOMERS}
    assert len(customers) >= 5
    assert all(re.fullmatch(r"C-1\d{3}", cid) for cid in customers)
    assert all(len(c.name.split()) >= 3 for c in customers.values())
    assert customers[seed_data.DISCOUNTED_CUSTOMER_ID].discount_pct == 10
    assert sum(1 for c in customers.values() if c.discount_pct) == 1


def test_orders_are_priced_and_paid_like_real_ones():
    products = {p.sku: p for p in seed_data.SEED_PRODUCTS}
    customers = {c.customer_id: c for c in seed_data.SEED_CUSTOMERS}
    for order in seed_data.SEED_ORDERS:
        discount = customers[order.customer_id].discount_pct
        assert order.customer_name == customers[order.customer_id].name
        for line in order.lines:
            assert line.unit_price_minor == products[line.sku].price_minor
            assert line.line_total_minor == line_total_minor(line.qty, line.unit_price_minor, discount)
        assert order.total_amount_minor == sum(line.line_total_minor for line in order.lines)
        assert order.paid_minor == order.total_amount_minor
        assert 0 <= order.refunded_minor <= order.paid_minor
        assert order.currency == "EUR"


def test_there_is_a_refundable_order_and_the_refunds_add_up():
    orders = {o.order_id: o for o in seed_data.SEED_ORDERS}
    refundable = orders[seed_data.REFUNDABLE_ORDER_ID]
    assert (refundable.status, refundable.refunded_minor) == ("placed", 0)
    assert refundable.remaining_minor == refundable.total_amount_minor > 0
    assert {o.status for o in orders.values()} == {"placed", "cancelled"}
    for order in orders.values():
        refunds = [r for r in seed_data.SEED_REFUNDS if r.order_id == order.order_id]
        assert sum(r.amount_minor for r in refunds) == order.refunded_minor
        if refunds:
            assert refunds[-1].remaining_minor == order.remaining_minor
