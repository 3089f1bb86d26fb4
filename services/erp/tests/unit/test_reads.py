from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from erpilot_erp.domain.model import Customer, Product
from erpilot_erp.domain.reads import (
    MAX_SEARCH_RESULTS,
    get_order_task,
    listing,
    matching_customers,
    matching_products,
    page_draft,
)

pytestmark = pytest.mark.unit


def search_products(products, query: str) -> dict:
    """What the ``search_products`` tool answers: the matching products as a list."""
    return listing(matching_products(products, query))


def search_customers(customers, query: str) -> dict:
    return listing(matching_customers(customers, query))


# --- get_order_task ----------------------------------------------------------------------------------


def test_no_open_draft_is_none(catalog):
    assert get_order_task([], "S-1", "tester") == {"status": "none"}


def test_one_open_draft_is_ok_with_the_whole_revision(catalog):
    draft = catalog.create([("SKU-A", 2), ("SKU-B", 1)])
    assert get_order_task([draft], "S-1", "tester") == {"status": "ok", "draft": draft.to_result()}


def test_several_open_drafts_are_ambiguous_with_candidates(catalog):
    first = catalog.create([("SKU-A", 1)], draft_id="D-1")
    second = catalog.create([("SKU-B", 2)], draft_id="D-2", customer_id="C-2",
                            now=catalog.now + timedelta(minutes=5))
    assert get_order_task([second, first], "S-1", "tester") == {
        "status": "ambiguous",
        "candidates": [
            {"draft_id": "D-1", "revision": 1, "customer_id": "C-1", "total_amount_minor": 1000},
            {"draft_id": "D-2", "revision": 1, "customer_id": "C-2", "total_amount_minor": 450},
        ],
    }


def test_submitted_drafts_and_other_sessions_drafts_do_not_count(catalog):
    mine = catalog.create(draft_id="D-1")
    submitted = replace(catalog.create(draft_id="D-2"), status="submitted")
    theirs = catalog.create(draft_id="D-3", session_id="S-2")
    assert get_order_task([mine, submitted, theirs], "S-1", "tester")["draft"]["draft_id"] == "D-1"
    assert get_order_task([submitted, theirs], "S-1", "tester") == {"status": "none"}


# --- get_draft pages ---------------------------------------------------------------------------------


def test_get_draft_without_a_page_has_every_line_and_the_line_count(catalog):
    draft = catalog.create([("SKU-A", n) for n in range(1, 8)]).to_result()
    assert page_draft(draft, None, None) == {**draft, "line_count": 7}


def test_a_page_keeps_item_numbers_and_the_whole_revisions_totals(catalog):
    draft = catalog.create([("SKU-A", n) for n in range(1, 8)] + [("SKU-B", 9)]).to_result()
    page = page_draft(draft, 2, 3)
    assert [(line["item_number"], line["qty"]) for line in page["lines"]] == [(3, 3), (4, 4), (5, 5)]
    assert (page["offset"], page["limit"], page["line_count"]) == (2, 3, 8)
    assert page["total_amount_minor"] == draft["total_amount_minor"]
    assert {k: v for k, v in page.items() if k not in ("lines", "offset", "limit", "line_count")} == \
        {k: v for k, v in draft.items() if k != "lines"}


@pytest.mark.parametrize(("offset", "limit", "numbers"), [
    (None, 2, [1, 2]), (6, None, [7, 8]), (7, 50, [8]), (8, 5, []), (100, 1, []),
])
def test_pages_at_the_edges(catalog, offset, limit, numbers):
    draft = catalog.create([("SKU-A", n) for n in range(1, 9)]).to_result()
    page = page_draft(draft, offset, limit)
    assert [line["item_number"] for line in page["lines"]] == numbers
    assert page["line_count"] == 8 and page["offset"] == (offset or 0)


# --- search ------------------------------------------------------------------------------------------


def test_search_products_matches_sku_or_name_case_insensitively(catalog):
    products = catalog.products.values()
    assert [p["sku"] for p in search_products(products, "widget b")["items"]] == ["SKU-B"]
    assert [p["sku"] for p in search_products(products, "sku-a")["items"]] == ["SKU-A"]
    assert [p["sku"] for p in search_products(products, "WIDGET")["items"]] == [
        "SKU-A", "SKU-B", "SKU-OLD", "SKU-USD", "SKU-ZERO",
    ]
    assert search_products(products, "imported")["items"] == [catalog.products["SKU-USD"].to_result()]


def test_search_with_no_match_is_an_empty_list(catalog):
    assert search_products(catalog.products.values(), "gadget") == {"items": []}


def test_empty_query_lists_everything_in_id_order(catalog):
    for query in ["", "  "]:
        found = search_products(catalog.products.values(), query)["items"]
        assert [p["sku"] for p in found] == sorted(catalog.products)


def test_search_returns_at_most_50_items():
    products = [Product(f"SKU-{n:03d}", f"Item {n}", "active", 100, "EUR", 1) for n in range(120)]
    items = search_products(reversed(products), "")["items"]
    assert len(items) == MAX_SEARCH_RESULTS == 50
    assert items[0]["sku"] == "SKU-000"
    assert items[-1]["sku"] == "SKU-049"


def test_search_customers_matches_id_or_full_name(catalog):
    customers = list(catalog.customers.values()) + [Customer("C-3", "Straße & Söhne GmbH", 0)]
    assert search_customers(customers, "beta bau")["items"] == [
        {"customer_id": "C-2", "name": "Beta Bau Aktiengesellschaft", "discount_pct": 10},
    ]
    assert [c["customer_id"] for c in search_customers(customers, "c-1")["items"]] == ["C-1"]
    assert [c["customer_id"] for c in search_customers(customers, "STRASSE")["items"]] == ["C-3"]
    assert len(search_customers(customers, "")["items"]) == 3
