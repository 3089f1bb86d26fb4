from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from erpilot_contracts.erp.v1 import PreviewV1
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.model import CreditNote
from erpilot_erp.domain.plans import NewRefund, OrderChange, Rows, StockChange

pytestmark = pytest.mark.unit


def rejected(code: str):
    return pytest.raises(BusinessError, match=rf"^{code}: ")


def args(amount: int, currency: str = "EUR") -> dict:
    return {"order_id": "O-1", "amount_minor": amount, "currency": currency, "channel": "original"}


def test_preview_shows_amount_channel_and_remaining_before_and_after(catalog):
    order = catalog.order(refunded_minor=500)
    preview = catalog.prepare("refund_payment", args(1000), catalog.state(order=order), catalog.now).preview
    assert preview["operation"] == "Refund payment"
    assert preview["object"] == "Order O-1"
    assert preview["target"] == "Alpha Trading GmbH"
    assert (preview["amount_minor"], preview["currency"]) == (1000, "EUR")
    assert preview["effects"] == [
        {"label": "refundable remaining", "before": 2500, "after": 1500, "unit": "EUR"},
        {"label": "refunded", "before": 500, "after": 1500, "unit": "EUR"},
    ]
    assert preview["notes"][0] == "Refund 10.00 EUR to the original payment channel."
    assert preview["details"]["channel"] == "original"
    PreviewV1.model_validate(preview)


def test_facts_record_paid_refunded_and_remaining(catalog):
    facts = catalog.prepare("refund_payment", args(1), catalog.state(order=catalog.order()), catalog.now).facts
    assert facts == {"order_id": "O-1", "currency": "EUR", "paid_minor": 3000, "refunded_minor": 0,
                     "remaining_minor": 3000}


def test_unknown_order_is_not_found(catalog):
    with rejected("not_found"):
        catalog.prepare("refund_payment", args(100), catalog.state(order=None), catalog.now)


def test_refund_in_another_currency_is_currency_mismatch(catalog):
    with rejected("currency_mismatch"):
        catalog.prepare("refund_payment", args(100, "USD"), catalog.state(order=catalog.order()), catalog.now)


def test_refund_above_remaining_is_refused_at_prepare(catalog):
    order = catalog.order(refunded_minor=2000)
    assert catalog.prepare("refund_payment", args(1000), catalog.state(order=order), catalog.now).preview
    with rejected("refund_exceeds_remaining") as exc:
        catalog.prepare("refund_payment", args(1001), catalog.state(order=order), catalog.now)
    assert exc.value.details["remaining_minor"] == 1000


def test_commit_records_the_refund_and_the_new_remainder(catalog):
    order = catalog.order(refunded_minor=500)
    facts = catalog.prepare("refund_payment", args(1000), catalog.state(order=order), catalog.now).facts
    state = catalog.state(order=order)
    plan = catalog.commit("refund_payment", args(1000), catalog.stored(facts), state, catalog.now, new_id="R-9")
    assert plan.result == {"refund_id": "R-9", "order_id": "O-1", "amount_minor": 1000, "currency": "EUR",
                           "remaining_minor": 1500}
    [change], [new] = plan.of(OrderChange), plan.of(NewRefund)
    assert (change.order.refunded_minor, change.order.status) == (1500, "placed")
    assert (new.refund.channel, new.refund.created_at) == ("original", catalog.now)
    assert plan.of(StockChange) == ()


def test_the_whole_payment_can_be_refunded_even_after_cancelling(catalog):
    order = catalog.order(status="cancelled")
    facts = catalog.prepare("refund_payment", args(3000), catalog.state(order=order), catalog.now).facts
    plan = catalog.commit("refund_payment", args(3000), facts, catalog.state(order=order), catalog.now, new_id="R-9")
    assert plan.result["remaining_minor"] == 0


def test_commit_after_another_refund_that_still_fits_is_order_changed(catalog):
    facts = catalog.prepare("refund_payment", args(1000), catalog.state(order=catalog.order()), catalog.now).facts
    meanwhile = catalog.order(refunded_minor=500)
    with rejected("order_changed"):
        catalog.commit("refund_payment", args(1000), facts, catalog.state(order=meanwhile), catalog.now, new_id="R-9")


def test_commit_above_what_remains_now_is_refund_exceeds_remaining(catalog):
    facts = catalog.prepare("refund_payment", args(1000), catalog.state(order=catalog.order()), catalog.now).facts
    meanwhile = catalog.order(refunded_minor=2500)
    with rejected("refund_exceeds_remaining"):
        catalog.commit("refund_payment", args(1000), facts, catalog.state(order=meanwhile), catalog.now, new_id="R-9")


def test_commit_needs_the_new_refund_id(catalog):
    facts = catalog.prepare("refund_payment", args(1000), catalog.state(order=catalog.order()), catalog.now).facts
    with pytest.raises(ValueError):
        catalog.commit("refund_payment", args(1000), facts, catalog.state(order=catalog.order()), catalog.now)


def credit_note(amount: int, order_id: str = "O-1") -> CreditNote:
    return CreditNote(credit_note_id="CN-1", order_id=order_id, amount_minor=amount, currency="EUR", reason="damaged",
                      remaining_minor=0, created_at=datetime(2026, 1, 1, tzinfo=UTC))


def with_notes(catalog, *notes: CreditNote):
    """The catalog's order with ``notes`` issued against it (its ``ORDER_CREDIT_NOTES`` row set)."""
    return replace(catalog.state(order=catalog.order()), row_sets={Rows.ORDER_CREDIT_NOTES: notes})


def test_credit_notes_count_against_what_is_refundable(catalog):
    """A full credit note and then a full refund would give the customer the order twice: refunds and credit notes
    together stay within the order's total (#33 review)."""
    credited = with_notes(catalog, credit_note(1200))
    prepared = catalog.prepare("refund_payment", args(1800), credited, catalog.now)
    assert prepared.facts["remaining_minor"] == 1800
    assert prepared.preview["effects"][0] == {"label": "refundable remaining", "before": 1800, "after": 0,
                                              "unit": "EUR"}
    with rejected("refund_exceeds_remaining") as exc:
        catalog.prepare("refund_payment", args(1801), credited, catalog.now)
    assert exc.value.details["remaining_minor"] == 1800
    other_order = with_notes(catalog, credit_note(3000, "O-2"))
    assert catalog.prepare("refund_payment", args(3000), other_order, catalog.now).facts["remaining_minor"] == 3000


def test_a_credit_note_issued_between_prepare_and_commit_is_rechecked(catalog):
    facts = catalog.prepare("refund_payment", args(2000), catalog.state(order=catalog.order()), catalog.now).facts
    meanwhile = with_notes(catalog, credit_note(1500))
    with rejected("refund_exceeds_remaining"):
        catalog.commit("refund_payment", args(2000), facts, meanwhile, catalog.now, new_id="R-9")
    still_fits = with_notes(catalog, credit_note(500))
    plan = catalog.commit("refund_payment", args(2000), facts, still_fits, catalog.now, new_id="R-9")
    assert plan.result["remaining_minor"] == 500
