from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

import pytest

from erpilot_contracts.erp.v1 import PreviewV1
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.plans import DraftSubmission, NewOrder, NewRefund, OrderChange, StockChange

pytestmark = pytest.mark.unit


def rejected(code: str):
    return pytest.raises(BusinessError, match=rf"^{code}: ")


def args_for(draft, revision=None):
    return {"draft_id": draft.draft_id, "revision": revision or draft.revision}


def prepare_submit(
    catalog, draft, *, latest=None, revision=None, now=None, stock_check="exact", session_id="S-1"
):
    state = catalog.state(latest=latest or draft, session_id=session_id)
    arguments = args_for(draft, revision)
    return catalog.prepare("submit_order", arguments, state, now or catalog.now, stock_check=stock_check)


def commit_submit(catalog, draft, facts, *, latest=None, now=None, stock_check="exact"):
    return catalog.commit(
        "submit_order", args_for(draft), catalog.stored(facts), catalog.state(latest=latest or draft),
        now or catalog.now, stock_check=stock_check, new_id="O-100",
    )


# --- prepare -----------------------------------------------------------------------------------------


def test_preview_shows_operation_object_target_amount_and_stock_effects(catalog):
    draft = catalog.create([("SKU-A", 2), ("SKU-B", 1)], customer_id="C-2", note="dock 3")
    preview = prepare_submit(catalog, draft).preview
    assert preview["operation"] == "Submit order"
    assert preview["object"] == "Draft D-1 revision 1"
    assert preview["target"] == "Beta Bau Aktiengesellschaft"
    assert (preview["amount_minor"], preview["currency"]) == (1800 + 225, "EUR")
    assert preview["effects"] == [
        {"label": "stock SKU-A", "before": 12, "after": 10, "unit": "pcs"},
        {"label": "stock SKU-B", "before": 5, "after": 4, "unit": "pcs"},
    ]
    assert preview["details"]["lines"] == [line.to_result() for line in draft.lines]
    assert (preview["details"]["draft_id"], preview["details"]["revision"]) == ("D-1", 1)
    assert preview["details"]["note"] == "dock 3"
    assert any("10% discount" in note for note in preview["notes"])
    assert any("20.25 EUR is captured" in note for note in preview["notes"])
    quoted = r"Prices are quoted until \d{4}-\d\d-\d\d \d\d:\d\d UTC\."
    assert any(re.fullmatch(quoted, note) for note in preview["notes"])
    PreviewV1.model_validate(preview)


def test_facts_record_the_quote_and_the_stock_shown(catalog):
    draft = catalog.create([("SKU-A", 2)])
    facts = prepare_submit(catalog, draft).facts
    assert catalog.stored(facts) == facts
    assert facts["stock_before"] == {"SKU-A": 12}
    assert facts["lines"] == [{"sku": "SKU-A", "name": "Widget A", "qty": 2, "unit_price_minor": 1000,
                               "discount_pct": 0, "line_total_minor": 2000}]
    assert (facts["revision"], facts["total_amount_minor"]) == (1, 2000)


def test_the_same_sku_on_two_lines_is_one_stock_effect(catalog):
    draft = catalog.create([("SKU-A", 2), ("SKU-A", 3)])
    effects = prepare_submit(catalog, draft).preview["effects"]
    assert effects == [{"label": "stock SKU-A", "before": 12, "after": 7, "unit": "pcs"}]


def test_the_latest_revision_is_what_gets_previewed(catalog):
    second = catalog.edit("update_draft_line", catalog.create(), item_number=1, expected_sku="SKU-A", qty=5)
    preview = prepare_submit(catalog, second).preview
    assert preview["object"] == "Draft D-1 revision 2"
    assert preview["amount_minor"] == 5000


def test_missing_draft_is_not_found(catalog):
    draft = catalog.create()
    with rejected("not_found"):
        catalog.prepare("submit_order", args_for(draft), catalog.state(latest=None), catalog.now)


def test_another_sessions_draft_is_not_found(catalog):
    with rejected("not_found"):
        prepare_submit(catalog, catalog.create(), session_id="S-2")


def test_a_revision_that_never_existed_is_not_found(catalog):
    with rejected("not_found"):
        prepare_submit(catalog, catalog.create(), revision=3)


def test_an_older_revision_is_draft_changed(catalog):
    first = catalog.create()
    second = catalog.edit("set_draft_note", first, note="newer")
    with rejected("draft_changed"):
        prepare_submit(catalog, first, latest=second)


def test_a_submitted_draft_is_closed(catalog):
    with rejected("draft_closed"):
        prepare_submit(catalog, replace(catalog.create(), status="submitted"))


def test_an_empty_draft_cannot_be_submitted(catalog):
    empty = catalog.edit("remove_draft_line", catalog.create(), item_number=1, expected_sku="SKU-A")
    with rejected("draft_empty"):
        prepare_submit(catalog, empty)


QUOTE_CHANGES = {
    "price": lambda c: c.change("SKU-B", price_minor=260),
    "name": lambda c: c.change("SKU-B", name="Widget B (new)"),
    "status": lambda c: c.change("SKU-B", status="discontinued"),
    "currency": lambda c: c.change("SKU-B", currency="USD"),
    "discount": lambda c: c.customers.update({"C-1": replace(c.customers["C-1"], discount_pct=5)}),
}


@pytest.mark.parametrize("change", QUOTE_CHANGES)
def test_prepare_refuses_a_quote_the_catalog_no_longer_matches(catalog, change):
    draft = catalog.create([("SKU-A", 1), ("SKU-B", 1)])
    QUOTE_CHANGES[change](catalog)
    with rejected("quote_changed") as exc:
        prepare_submit(catalog, draft)
    assert any("SKU-B" in item or "discount" in item for item in exc.value.details["changes"])


def test_an_expired_quote_is_refused(catalog):
    draft = catalog.create(quote_ttl=timedelta(minutes=10))
    assert prepare_submit(catalog, draft, now=draft.valid_until).preview  # still valid at the very instant
    with rejected("quote_expired"):
        prepare_submit(catalog, draft, now=draft.valid_until + timedelta(seconds=1))


@pytest.mark.parametrize("stock_check", ["exact", "sufficient"])
def test_ordering_more_than_is_on_hand_is_insufficient_stock(catalog, stock_check):
    draft = catalog.create([("SKU-A", 1), ("SKU-ZERO", 1)])
    with rejected("insufficient_stock"):
        prepare_submit(catalog, draft, stock_check=stock_check)


def test_exact_refuses_stock_that_moved_since_the_quote(catalog):
    draft = catalog.create([("SKU-A", 2)])
    catalog.change("SKU-A", on_hand=11)
    with rejected("stock_changed") as exc:
        prepare_submit(catalog, draft)
    assert (exc.value.details["stock_before"], exc.value.details["on_hand"]) == (12, 11)


def test_sufficient_accepts_moved_stock_and_shows_the_current_figure(catalog):
    draft = catalog.create([("SKU-A", 2)])
    catalog.change("SKU-A", on_hand=4)
    prepared = prepare_submit(catalog, draft, stock_check="sufficient")
    assert prepared.preview["effects"] == [{"label": "stock SKU-A", "before": 4, "after": 2, "unit": "pcs"}]
    assert prepared.facts["stock_before"] == {"SKU-A": 4}


# --- commit ------------------------------------------------------------------------------------------


def test_commit_places_a_paid_order_at_the_quoted_prices_and_takes_stock(catalog):
    draft = catalog.create([("SKU-A", 2), ("SKU-B", 1)], customer_id="C-2")
    facts = prepare_submit(catalog, draft).facts
    later = catalog.now + timedelta(minutes=3)
    plan = commit_submit(catalog, draft, facts, now=later)
    [placed] = plan.of(NewOrder)
    order = placed.order
    assert order is not None
    assert (order.order_id, order.status, order.customer_id, order.customer_name) == (
        "O-100", "placed", "C-2", "Beta Bau Aktiengesellschaft",
    )
    assert [line.to_result() for line in order.lines] == [
        {"sku": "SKU-A", "name": "Widget A", "qty": 2, "unit_price_minor": 1000, "line_total_minor": 1800},
        {"sku": "SKU-B", "name": "Widget B", "qty": 1, "unit_price_minor": 250, "line_total_minor": 225},
    ]
    assert (order.total_amount_minor, order.paid_minor, order.refunded_minor) == (2025, 2025, 0)
    assert (order.draft_id, order.revision, order.created_at) == ("D-1", 1, later)
    assert plan.result == order.to_result()
    assert plan.of(StockChange) == (StockChange("SKU-A", 12, 10), StockChange("SKU-B", 5, 4))
    assert plan.of(StockChange)[0].delta == -2
    assert plan.of(DraftSubmission) == (DraftSubmission("D-1", 1, "O-100"),)
    assert plan.of(OrderChange) == plan.of(NewRefund) == ()


def test_commit_after_a_newer_revision_is_draft_changed(catalog):
    draft = catalog.create()
    facts = prepare_submit(catalog, draft).facts
    newer = catalog.edit("set_draft_note", draft, note="changed while waiting")
    with rejected("draft_changed"):
        commit_submit(catalog, draft, facts, latest=newer)


def test_commit_of_a_draft_submitted_meanwhile_is_draft_changed(catalog):
    draft = catalog.create()
    facts = prepare_submit(catalog, draft).facts
    with rejected("draft_changed"):
        commit_submit(catalog, draft, facts, latest=replace(draft, status="submitted"))


@pytest.mark.parametrize("change", QUOTE_CHANGES)
def test_commit_never_silently_reprices(catalog, change):
    draft = catalog.create([("SKU-A", 1), ("SKU-B", 1)])
    facts = prepare_submit(catalog, draft).facts
    QUOTE_CHANGES[change](catalog)
    with rejected("quote_changed"):
        commit_submit(catalog, draft, facts)


def test_commit_after_valid_until_is_quote_expired(catalog):
    draft = catalog.create(quote_ttl=timedelta(minutes=15))
    facts = prepare_submit(catalog, draft).facts
    assert commit_submit(catalog, draft, facts, now=draft.valid_until).of(NewOrder)
    with rejected("quote_expired"):
        commit_submit(catalog, draft, facts, now=draft.valid_until + timedelta(microseconds=1))


@pytest.mark.parametrize("on_hand", [11, 13, 100])
def test_exact_refuses_any_stock_movement_since_the_preview(catalog, on_hand):
    draft = catalog.create([("SKU-A", 2)])
    facts = prepare_submit(catalog, draft).facts
    catalog.change("SKU-A", on_hand=on_hand)
    with rejected("stock_changed"):
        commit_submit(catalog, draft, facts)


@pytest.mark.parametrize(("on_hand", "after"), [(12, 10), (30, 28), (3, 1), (2, 0)])
def test_sufficient_commits_while_stock_still_covers_every_line(catalog, on_hand, after):
    draft = catalog.create([("SKU-A", 2)])
    facts = prepare_submit(catalog, draft, stock_check="sufficient").facts
    catalog.change("SKU-A", on_hand=on_hand)
    plan = commit_submit(catalog, draft, facts, stock_check="sufficient")
    assert plan.of(StockChange) == (StockChange("SKU-A", on_hand, after),)


def test_sufficient_refuses_stock_that_no_longer_covers_a_line(catalog):
    draft = catalog.create([("SKU-A", 2), ("SKU-A", 2)])
    facts = prepare_submit(catalog, draft, stock_check="sufficient").facts
    catalog.change("SKU-A", on_hand=3)  # covers each line alone, not both together
    with rejected("stock_changed"):
        commit_submit(catalog, draft, facts, stock_check="sufficient")


def test_stock_never_goes_negative_even_if_the_facts_say_it_may(catalog):
    draft = catalog.create([("SKU-A", 2)])
    facts = prepare_submit(catalog, draft).facts
    catalog.change("SKU-A", on_hand=1)
    facts["stock_before"] = {"SKU-A": 1}  # as if the preview had shown 1 -> -1
    with rejected("insufficient_stock"):
        commit_submit(catalog, draft, facts)


def test_commit_needs_the_new_order_id(catalog):
    draft = catalog.create()
    facts = prepare_submit(catalog, draft).facts
    with pytest.raises(ValueError):
        catalog.commit("submit_order", args_for(draft), facts, catalog.state(latest=draft), catalog.now)
