"""The approval page and the inbox say why a person may not decide, and show money, units and dates readably.

``can_decide`` / ``cannot_decide_reason`` come from the approval service for the signed-in person (here
the harness fake, which follows ``erpilot_approval.domain.eligibility``); the page only shows them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from playwright.sync_api import expect

from erpilot_contracts.fingerprint import fingerprint as compute_fingerprint
from tests.browser.harness import submit_order_approval, tok

pytestmark = pytest.mark.browser
TOKYO = timezone(timedelta(hours=9))


def refund_approval(*, requested_by: str, amount_minor: int = 2500, currency: str = "EUR", **overrides):
    """A refund_payment record shaped like the ERP's preview: money effects carry the currency as unit."""
    arguments = {"order_id": "O-1007", "amount_minor": amount_minor, "currency": currency, "channel": "original"}
    preview = {
        "operation": "Refund payment", "object": "Order O-1007", "target": "Acme Office Supplies GmbH",
        "amount_minor": amount_minor, "currency": currency,
        "effects": [{"label": "refundable remaining", "before": 12000, "after": 12000 - amount_minor, "unit": currency},
                    {"label": "refunded", "before": 0, "after": amount_minor, "unit": currency}],
        "notes": [], "details": {"order_id": "O-1007", "customer_id": "C-1001", "order_status": "placed",
                                 "channel": "original"},
    }
    return submit_order_approval(
        requested_by=requested_by, required_roles=("manager",), tool="refund_payment", arguments=arguments,
        fingerprint=compute_fingerprint("refund_payment", 1, arguments), risk="high", preview=preview, **overrides)


def test_a_manager_who_requested_a_refund_sees_separation_of_duties_not_approve(console, open_page, artifacts):
    record = console.fake.add_approval(refund_approval(requested_by="mgr-sod"), separation_of_duties=True)
    page = open_page(console, tok("mgr-sod", "requester", "manager"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#no-decision")).to_be_visible()
    expect(page.locator("#no-decision")).to_have_attribute("data-reason", "separation_of_duties")
    expect(page.locator("#no-decision")).to_contain_text("under separation of duties another person must approve it")
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.locator("#reject")).to_be_visible()  # rejecting one's own request is allowed
    page.screenshot(path=str(artifacts / "approval-reason-separation-of-duties.png"), full_page=True)

    page.fill("#comment", "wrong order")
    page.click("#reject")
    expect(page.locator("#decision-headline")).to_have_text("Rejected by mgr-sod")
    assert record["status"] == "rejected"


def test_the_inbox_shows_the_reason_instead_of_a_review_button(console, open_page, artifacts):
    own = console.fake.add_approval(refund_approval(requested_by="mgr-inbox"), separation_of_duties=True)
    other = console.fake.add_approval(refund_approval(requested_by="someone-else", amount_minor=700),
                                      separation_of_duties=True)
    page = open_page(console, tok("mgr-inbox", "manager"))

    page.goto("/#approvals")

    own_row = page.locator(f"tr[data-pending-id='{own['pending_id']}']")
    other_row = page.locator(f"tr[data-pending-id='{other['pending_id']}']")
    expect(own_row.locator(".cannot-decide")).to_contain_text("another person must approve it")
    expect(own_row.get_by_role("link", name="View")).to_be_visible()
    expect(own_row.get_by_role("link", name="Review")).to_have_count(0)
    expect(other_row.get_by_role("link", name="Review")).to_be_visible()
    expect(other_row.locator(".cannot-decide")).to_have_count(0)
    page.screenshot(path=str(artifacts / "inbox-reason-separation-of-duties.png"), full_page=True)


def test_a_requester_without_the_role_is_told_which_role_is_needed(console, open_page, artifacts):
    record = console.fake.add_approval(submit_order_approval(requested_by="req-role", required_roles=("manager",)))
    page = open_page(console, tok("req-role", "requester", "approver"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#no-decision")).to_have_attribute("data-reason", "role")
    expect(page.locator("#no-decision")).to_contain_text(
        "it needs one of manager; you hold requester, approver.")
    expect(page.locator("#decide-form")).to_have_count(0)
    page.screenshot(path=str(artifacts / "approval-reason-role.png"), full_page=True)


def test_money_is_formatted_from_minor_units_and_effects_carry_their_unit(console, open_page, artifacts):
    order = console.fake.add_approval(submit_order_approval())
    refund = console.fake.add_approval(refund_approval(requested_by="req-x", amount_minor=2500))
    yen = console.fake.add_approval(refund_approval(requested_by="req-x", amount_minor=4200, currency="JPY"))
    page = open_page(console, tok("mgr-money", "manager"))

    page.goto(f"/resume/{order['pending_id']}")
    effects = page.locator("#effects tbody tr")
    expect(effects.nth(0)).to_contain_text("1,200 pcs")
    expect(effects.nth(0)).to_contain_text("1,000 pcs")
    expect(page.locator("#draft-lines")).to_contain_text("4.99 EUR")
    expect(page.locator("#amount-big")).to_have_text("1,234.50 EUR")
    page.screenshot(path=str(artifacts / "approval-money-units-order.png"), full_page=True)

    page.goto(f"/resume/{refund['pending_id']}")
    expect(page.locator("#amount-big")).to_have_text("25.00 EUR")
    expect(page.locator("#effects tbody tr").nth(0)).to_contain_text("120.00 EUR")
    expect(page.locator("#effects tbody tr").nth(0)).to_contain_text("95.00 EUR")
    page.screenshot(path=str(artifacts / "approval-money-units-refund.png"), full_page=True)

    page.goto(f"/resume/{yen['pending_id']}")  # JPY has no minor unit (ISO 4217 exponent 0)
    expect(page.locator("#amount-big")).to_have_text("4,200 JPY")
    expect(page.locator("#effects tbody tr").nth(1)).to_contain_text("4,200 JPY")


def test_dates_are_shown_in_the_viewers_locale_and_time_zone(console, open_page, artifacts):
    decided = datetime(2026, 10, 19, 12, 5, 9, tzinfo=UTC)
    record = console.fake.add_approval(submit_order_approval(
        status="approved", decided_by="mgr-d", decided_at=decided.isoformat()))
    console.fake.operations[record["operation_id"]] = {"operation_id": record["operation_id"], "tool": "submit_order",
                                                       "status": "prepared"}
    page = open_page(console, tok("mgr-dates", "manager"), locale="de-DE", timezone_id="Asia/Tokyo")

    page.goto(f"/resume/{record['pending_id']}")

    valid_until = datetime.fromisoformat(record["preview"]["details"]["valid_until"]).astimezone(TOKYO)
    expires = datetime.fromisoformat(record["expires_at"]).astimezone(TOKYO)
    for selector, moment in (("#valid-until time", valid_until), ("#deadline time", expires),
                             ("#decision-at", decided.astimezone(TOKYO))):
        element = page.locator(selector)
        german_date = f"{moment.day:02d}.{moment.month:02d}.{moment.year}"
        expect(element).to_contain_text(german_date)  # de-DE: 19.10.2026
        expect(element).to_contain_text(moment.strftime("%H:%M:%S"))  # Tokyo time, not UTC
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", element.get_attribute("datetime"))
        assert element.get_attribute("title").endswith(" UTC")
    expect(page.locator("#decision-at")).to_contain_text("21:05:09")
    page.screenshot(path=str(artifacts / "approval-local-dates.png"), full_page=True)


def test_without_javascript_dates_fall_back_to_utc(console, open_page):
    record = console.fake.add_approval(submit_order_approval(
        status="rejected", decided_by="mgr-e", decided_at="2026-10-19T12:05:09+00:00"))
    page = open_page(console, tok("mgr-nojs", "manager"), java_script_enabled=False, timezone_id="Asia/Tokyo")

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#decision-at")).to_have_text("2026-10-19 12:05:09 UTC")
    expect(page.locator("#decision-headline")).to_have_text("Rejected by mgr-e")
