"""issue_credit_note: at most the order's total less refunds and earlier credit notes, checked at prepare and
again at commit on the rows the commit holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from erpilot_contracts.erp.v1 import PreviewV1
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.issue_credit_note import NewCreditNote
from erpilot_erp.domain.model import CreditNote
from erpilot_erp.domain.plans import OrderChange, Rows, StockChange

pytestmark = pytest.mark.unit


def rejected(code: str):
    return pytest.raises(BusinessError, match=rf"^{code}: ")


def args(amount: int, currency: str = "EUR", order_id: str = "O-1") -> dict:
    return {"order_id": order_id, "amount_minor": amount, "currency": currency, "reason": "late delivery"}


def note(amount: int, order_id: str = "O-1", note_id: str = "CN-1") -> CreditNote:
    return CreditNote(note_id, order_id, amount, "EUR", "earlier", 0, created_at=None)  # type: ignore[arg-type]


def state(catalog, order=None, notes=()):
    return replace(catalog.state(order=catalog.order() if order is None else order),
                   row_sets={Rows.ORDER_CREDIT_NOTES: tuple(notes)})


def test_preview_shows_the_credit_and_what_stays_creditable(catalog):
    prepared = catalog.prepare("issue_credit_note", args(400), state(catalog, catalog.order(refunded_minor=500),
                                                                       [note(600)]), catalog.now)
    preview = prepared.preview
    assert (preview["operation"], preview["object"]) == ("Issue credit note", "Credit note on order O-1")
    assert (preview["amount_minor"], preview["currency"], preview["target"]) == (400, "EUR", "Alpha Trading GmbH")
    # total 3000 - refunded 500 - credited 600 = 1900 creditable; after this note 1500
    assert preview["effects"] == [
        {"label": "creditable remaining", "before": 1900, "after": 1500, "unit": "EUR"},
        {"label": "credited", "before": 600, "after": 1000, "unit": "EUR"},
    ]
    assert "Reason: late delivery" in preview["notes"]
    assert prepared.facts == {"order_id": "O-1", "currency": "EUR", "remaining_minor": 1900}
    PreviewV1.model_validate(preview)


def test_exactly_the_remaining_amount_is_allowed_one_minor_unit_more_is_refused_at_prepare(catalog):
    loaded = state(catalog, catalog.order(refunded_minor=1000), [note(500)])  # 3000 - 1000 - 500 = 1500
    assert catalog.prepare("issue_credit_note", args(1500), loaded, catalog.now).facts["remaining_minor"] == 1500
    with rejected("credit_exceeds_remaining") as exc:
        catalog.prepare("issue_credit_note", args(1501), loaded, catalog.now)
    assert exc.value.details["remaining_minor"] == 1500


@pytest.mark.parametrize(("refunded", "notes", "remaining"), [
    (0, [], 3000),
    (3000, [], 0),  # fully refunded: nothing left to credit
    (0, [note(1000), note(2000, note_id="CN-2")], 0),  # earlier credit notes count, every one of them
    (2500, [note(400)], 100),
])
def test_refunds_and_every_earlier_credit_note_count_against_the_total(catalog, refunded, notes, remaining):
    loaded = state(catalog, catalog.order(refunded_minor=refunded), notes)
    if remaining:
        assert catalog.prepare("issue_credit_note", args(remaining), loaded, catalog.now).preview
    with rejected("credit_exceeds_remaining"):
        catalog.prepare("issue_credit_note", args(remaining + 1), loaded, catalog.now)


def test_another_orders_credit_notes_do_not_count(catalog):
    loaded = state(catalog, notes=[note(3000, order_id="O-2")])
    assert catalog.prepare("issue_credit_note", args(3000), loaded, catalog.now).facts["remaining_minor"] == 3000


def test_a_credit_note_in_another_currency_is_currency_mismatch(catalog):
    with rejected("currency_mismatch"):
        catalog.prepare("issue_credit_note", args(100, "USD"), state(catalog), catalog.now)


def test_a_cancelled_order_takes_no_credit_note(catalog):
    with rejected("order_changed"):
        catalog.prepare("issue_credit_note", args(100), state(catalog, catalog.order(status="cancelled")),
                        catalog.now)


def test_an_unknown_order_or_another_persons_is_not_found(catalog):
    with rejected("not_found"):
        catalog.prepare("issue_credit_note", args(100), replace(catalog.state(order=None)), catalog.now)
    theirs = catalog.order(owner="someone-else", session_id="S-9")
    with rejected("not_found"):
        catalog.prepare("issue_credit_note", args(100), state(catalog, theirs), catalog.now)


def test_commit_issues_the_note_and_moves_nothing_else(catalog):
    loaded = state(catalog, notes=[note(1000)])
    facts = catalog.stored(catalog.prepare("issue_credit_note", args(500), loaded, catalog.now).facts)
    plan = catalog.commit("issue_credit_note", args(500), facts, loaded, catalog.now, new_id="CN-9")
    assert plan.result == {"credit_note_id": "CN-9", "order_id": "O-1", "amount_minor": 500, "currency": "EUR",
                           "reason": "late delivery", "remaining_minor": 1500}
    [issued] = plan.of(NewCreditNote)
    assert issued.note.created_at == catalog.now
    assert plan.of(StockChange) == plan.of(OrderChange) == ()  # no stock, no refund, the order stays as it was


def test_commit_rechecks_the_limit_against_notes_issued_since_the_preview(catalog):
    facts = catalog.stored(catalog.prepare("issue_credit_note", args(2000), state(catalog), catalog.now).facts)
    meanwhile = state(catalog, notes=[note(1500)])  # another note committed between preview and commit
    with rejected("credit_exceeds_remaining") as exc:
        catalog.commit("issue_credit_note", args(2000), facts, meanwhile, catalog.now, new_id="CN-9")
    assert exc.value.details["remaining_minor"] == 1500
    # one that still fits commits: the approved amount against that order still holds
    plan = catalog.commit("issue_credit_note", args(1500), facts, meanwhile, catalog.now, new_id="CN-9")
    assert plan.result["remaining_minor"] == 0


def test_commit_rechecks_refunds_and_cancellation_since_the_preview(catalog):
    facts = catalog.stored(catalog.prepare("issue_credit_note", args(1000), state(catalog), catalog.now).facts)
    with rejected("credit_exceeds_remaining"):
        catalog.commit("issue_credit_note", args(1000), facts, state(catalog, catalog.order(refunded_minor=2500)),
                       catalog.now, new_id="CN-9")
    with rejected("order_changed"):
        catalog.commit("issue_credit_note", args(1000), facts, state(catalog, catalog.order(status="cancelled")),
                       catalog.now, new_id="CN-9")


def test_commit_needs_its_new_id(catalog):
    with pytest.raises(ValueError, match="needs a new credit_note id"):
        catalog.commit("issue_credit_note", args(10), {}, state(catalog), catalog.now)
