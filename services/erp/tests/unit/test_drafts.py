from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from erpilot_contracts.tools.v1 import InvalidArguments, UnknownTool
from erpilot_erp.domain.drafts import DEFAULT_QUOTE_TTL, SetDraftNote, edit_draft, read_draft
from erpilot_erp.domain.errors import BusinessError

pytestmark = pytest.mark.unit


def rejected(code: str):
    """Expect a BusinessError with exactly this code."""
    return pytest.raises(BusinessError, match=rf"^{code}: ")


# --- create ------------------------------------------------------------------------------------------


def test_create_prices_every_line_from_the_catalog(catalog):
    draft = catalog.create([("SKU-A", 3), ("SKU-B", 2)], note="ring twice")
    assert (draft.draft_id, draft.revision, draft.session_id, draft.status) == ("D-1", 1, "S-1", "open")
    assert (draft.customer_id, draft.customer_name) == ("C-1", "Alpha Trading GmbH")
    assert [line.to_result() for line in draft.lines] == [
        {"item_number": 1, "sku": "SKU-A", "name": "Widget A", "qty": 3, "unit_price_minor": 1000,
         "discount_pct": 0, "line_total_minor": 3000, "stock_before": 12},
        {"item_number": 2, "sku": "SKU-B", "name": "Widget B", "qty": 2, "unit_price_minor": 250,
         "discount_pct": 0, "line_total_minor": 500, "stock_before": 5},
    ]
    assert (draft.total_amount_minor, draft.currency, draft.note) == (3500, "EUR", "ring twice")
    assert draft.created_at == catalog.now
    assert draft.valid_until == catalog.now + DEFAULT_QUOTE_TTL


def test_customer_discount_applies_to_every_line_and_rounds_half_up(catalog):
    catalog.change("SKU-B", price_minor=15)  # 1 x 15 at 10% off = 13.5 -> 14
    draft = catalog.create([("SKU-A", 3), ("SKU-B", 1)], customer_id="C-2")
    assert [(line.discount_pct, line.line_total_minor) for line in draft.lines] == [(10, 2700), (10, 14)]
    assert draft.total_amount_minor == 2714


def test_quote_ttl_sets_valid_until(catalog):
    draft = catalog.create(quote_ttl=timedelta(minutes=5))
    assert draft.valid_until == catalog.now + timedelta(minutes=5)


def test_create_for_unknown_customer_is_not_found(catalog):
    with rejected("not_found"):
        catalog.create(customer_id="C-404")


def test_create_with_unknown_product_is_not_found(catalog):
    with rejected("not_found") as exc:
        catalog.create([("SKU-A", 1), ("SKU-NOPE", 1)])
    assert "SKU-NOPE" in exc.value.message


def test_discontinued_product_cannot_be_drafted(catalog):
    with rejected("product_unavailable"):
        catalog.create([("SKU-OLD", 1)])


def test_lines_in_another_currency_are_refused(catalog):
    with rejected("currency_mismatch"):
        catalog.create([("SKU-A", 1), ("SKU-USD", 1)])


def test_a_draft_may_quote_more_than_is_on_hand_because_it_reserves_nothing(catalog):
    draft = catalog.create([("SKU-ZERO", 4)])
    assert draft.lines[0].stock_before == 0
    assert catalog.products["SKU-ZERO"].on_hand == 0


# --- edits -------------------------------------------------------------------------------------------


def test_update_makes_a_new_revision_and_leaves_the_old_one_unchanged(catalog):
    first = catalog.create([("SKU-A", 2), ("SKU-B", 1)])
    first_result = first.to_result()
    second = catalog.edit("update_draft_line", first, item_number=2, expected_sku="SKU-B", qty=4,
                          now=catalog.now + timedelta(minutes=1))
    assert second.revision == 2
    assert [(line.sku, line.qty) for line in second.lines] == [("SKU-A", 2), ("SKU-B", 4)]
    assert second.total_amount_minor == 3000
    assert second.created_at == catalog.now + timedelta(minutes=1)
    assert second.valid_until == second.created_at + DEFAULT_QUOTE_TTL
    assert first.to_result() == first_result
    assert first.lines[1].qty == 1


def test_every_new_revision_rereads_price_name_stock_and_discount(catalog):
    first = catalog.create([("SKU-A", 2)], customer_id="C-2")
    catalog.change("SKU-A", price_minor=1100, name="Widget A (v2)", on_hand=7)
    catalog.customers["C-2"] = replace(catalog.customers["C-2"], discount_pct=20)
    second = catalog.edit("set_draft_note", first, note="new prices")
    line = second.lines[0]
    assert (line.unit_price_minor, line.name, line.stock_before, line.discount_pct) == (
        1100, "Widget A (v2)", 7, 20,
    )
    assert line.line_total_minor == 1760
    assert first.lines[0].unit_price_minor == 1000


def test_add_appends_a_line(catalog):
    second = catalog.edit("add_draft_line", catalog.create(), sku="SKU-B", qty=3)
    assert [(line.item_number, line.sku, line.qty) for line in second.lines] == [
        (1, "SKU-A", 2), (2, "SKU-B", 3),
    ]
    assert second.total_amount_minor == 2750


def test_add_discontinued_product_is_unavailable(catalog):
    with rejected("product_unavailable"):
        catalog.edit("add_draft_line", catalog.create(), sku="SKU-OLD", qty=1)


def test_add_unknown_product_is_not_found(catalog):
    with rejected("not_found"):
        catalog.edit("add_draft_line", catalog.create(), sku="SKU-NOPE", qty=1)


def test_add_product_in_another_currency_is_refused(catalog):
    with rejected("currency_mismatch"):
        catalog.edit("add_draft_line", catalog.create(), sku="SKU-USD", qty=1)


def test_remove_renumbers_the_remaining_lines(catalog):
    first = catalog.create([("SKU-A", 1), ("SKU-B", 2), ("SKU-ZERO", 3)])
    second = catalog.edit("remove_draft_line", first, item_number=2, expected_sku="SKU-B")
    assert [(line.item_number, line.sku) for line in second.lines] == [(1, "SKU-A"), (2, "SKU-ZERO")]
    assert second.total_amount_minor == 1000 + 2100
    assert len(first.lines) == 3


def test_removing_the_last_line_leaves_an_empty_draft_in_its_currency(catalog):
    second = catalog.edit("remove_draft_line", catalog.create(), item_number=1, expected_sku="SKU-A")
    assert (second.lines, second.total_amount_minor, second.currency) == ((), 0, "EUR")
    third = catalog.edit("add_draft_line", second, sku="SKU-B", qty=1)
    assert third.total_amount_minor == 250


def test_set_note_keeps_the_lines(catalog):
    first = catalog.create([("SKU-A", 2), ("SKU-B", 1)], note="old")
    second = catalog.edit("set_draft_note", first, note="leave at reception")
    assert second.note == "leave at reception"
    assert [(line.sku, line.qty) for line in second.lines] == [("SKU-A", 2), ("SKU-B", 1)]
    assert first.note == "old"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("update_draft_line", {"item_number": 1, "expected_sku": "SKU-A", "qty": 5}),
        ("add_draft_line", {"sku": "SKU-B", "qty": 1}),
        ("remove_draft_line", {"item_number": 1, "expected_sku": "SKU-A"}),
        ("set_draft_note", {"note": "x"}),
    ],
)
def test_every_edit_on_a_stale_base_revision_is_draft_changed(catalog, tool, arguments):
    first = catalog.create()
    second = catalog.edit("set_draft_note", first, note="moved on")
    with rejected("draft_changed") as exc:
        catalog.edit(tool, second, base_revision=1, **arguments)
    assert exc.value.details["latest_revision"] == 2


@pytest.mark.parametrize("tool", ["update_draft_line", "remove_draft_line"])
def test_a_line_holding_another_sku_is_sku_mismatch(catalog, tool):
    first = catalog.create([("SKU-A", 1), ("SKU-B", 1)])
    extra = {"qty": 3} if tool == "update_draft_line" else {}
    with rejected("sku_mismatch") as exc:
        catalog.edit(tool, first, item_number=2, expected_sku="SKU-A", **extra)
    assert exc.value.details["actual_sku"] == "SKU-B"


@pytest.mark.parametrize("tool", ["update_draft_line", "remove_draft_line"])
def test_a_missing_item_number_is_line_not_found(catalog, tool):
    extra = {"qty": 3} if tool == "update_draft_line" else {}
    with rejected("line_not_found"):
        catalog.edit(tool, catalog.create(), item_number=2, expected_sku="SKU-A", **extra)


def test_a_submitted_draft_is_closed(catalog):
    submitted = replace(catalog.create(), status="submitted")
    with rejected("draft_closed"):
        catalog.edit("set_draft_note", submitted, note="too late")


def test_another_sessions_draft_is_not_found_for_edits(catalog):
    theirs = catalog.create(session_id="S-2")
    with rejected("not_found"):
        catalog.edit("update_draft_line", theirs, item_number=1, expected_sku="SKU-A", qty=9)


def test_editing_a_draft_that_does_not_exist_is_not_found(catalog):
    with rejected("not_found"):
        edit_draft(
            SetDraftNote(draft_id="D-9", base_revision=1, note="x"), None,
            session_id="S-1", requested_by="tester", customer=None, products=catalog.products, now=catalog.now,
        )


def test_a_line_discontinued_since_blocks_edits_until_it_is_removed(catalog):
    first = catalog.create([("SKU-A", 1), ("SKU-B", 1)])
    catalog.change("SKU-B", status="discontinued")
    with rejected("product_unavailable"):
        catalog.edit("update_draft_line", first, item_number=1, expected_sku="SKU-A", qty=2)
    second = catalog.edit("remove_draft_line", first, item_number=2, expected_sku="SKU-B")
    assert [line.sku for line in second.lines] == ["SKU-A"]


def test_edit_arguments_are_validated_strictly(catalog):
    first = catalog.create()
    with pytest.raises(InvalidArguments):
        catalog.edit("update_draft_line", first, item_number=1, expected_sku="SKU-A", qty=2.0)
    with pytest.raises(InvalidArguments):
        catalog.edit("set_draft_note", first, note="x", surprise=True)


def test_edit_draft_only_runs_edit_tools(catalog):
    with pytest.raises(ValueError):
        catalog.edit("submit_order", catalog.create(), revision=1)
    with pytest.raises((ValueError, UnknownTool)):
        catalog.edit("rename_draft", catalog.create())


# --- read --------------------------------------------------------------------------------------------


def test_read_draft_returns_the_sessions_own_revision(catalog):
    draft = catalog.create()
    assert read_draft(draft, "S-1", "D-1", requested_by="tester") is draft


@pytest.mark.parametrize("session_id", ["S-2", ""])
def test_read_draft_of_another_session_is_not_found(catalog, session_id):
    with rejected("not_found"):
        read_draft(catalog.create(), session_id, "D-1", requested_by="tester")


def test_read_missing_draft_is_not_found():
    with rejected("not_found"):
        read_draft(None, "S-1", "D-1", requested_by="tester")
