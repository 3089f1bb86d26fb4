"""The approval page (GET /resume/{pending_id}) in Chromium against the real gateway, other services faked."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from playwright.sync_api import expect

from erpilot.stack.tokens import make_token
from tests.browser.harness import SECRET, now, submit_order_approval, tok

pytestmark = pytest.mark.browser


def test_without_a_token_the_page_is_a_sign_in_form_and_never_the_preview(console, new_page, artifacts):
    record = console.fake.add_approval(submit_order_approval())
    page = new_page(console.base_url)

    response = page.goto(f"/resume/{record['pending_id']}")

    assert response.status == 401
    expect(page.locator("#signin")).to_be_visible()
    page.screenshot(path=str(artifacts / "sign-in.png"))
    html = page.content()
    for secret in ("1,234.50", record["fingerprint"], "Acme Office", "D-1002", "Back door"):
        assert secret not in html
    page.fill("#token", tok("appr-signin", "approver"))
    page.click("#signin button[type=submit]")
    expect(page).to_have_url(re.compile(f"/resume/{record['pending_id']}$"))
    expect(page.locator("#amount-big")).to_have_text("1,234.50 EUR")


def test_a_bad_token_in_the_header_or_cookie_gets_the_sign_in_form(console):
    record = console.fake.add_approval(submit_order_approval())
    url = f"{console.base_url}/resume/{record['pending_id']}"
    expired = make_token(SECRET, "appr", ["approver"], ttl=timedelta(seconds=-5))

    by_header = httpx.get(url, headers={"Authorization": f"Bearer {expired}"})
    by_cookie = httpx.get(url, cookies={"erpilot_token": "not-a-jwt"})
    good_header = httpx.get(url, headers={"Authorization": f"Bearer {tok('appr', 'approver')}"})

    for bad in (by_header, by_cookie):
        assert bad.status_code == 401 and "invalid or has expired" in bad.text and "1,234.50" not in bad.text
    assert good_header.status_code == 200 and "1,234.50 EUR" in good_header.text
    assert "script-src 'self'" in good_header.headers["content-security-policy"]
    assert good_header.headers["cache-control"] == "no-store"


def test_the_page_shows_what_is_approved_and_approve_sends_the_fingerprint_shown(console, new_page, artifacts):
    record = console.fake.add_approval(submit_order_approval(requested_by="req-alice"))
    page = new_page(console.base_url, tok("appr-bob", "approver"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#operation")).to_have_text("Submit order")
    expect(page.locator("#object")).to_have_text("Draft D-1002 revision 3")
    expect(page.locator("#amount")).to_have_text("1,234.50 EUR")
    expect(page.locator("#target")).to_have_text("Acme Office Supplies GmbH")
    expect(page.locator("#requester")).to_have_text("req-alice")
    expect(page.locator("#fingerprint")).to_have_text(record["fingerprint"])
    expect(page.locator("#draft h2")).to_have_text("Draft D-1002, revision 3")
    rows = page.locator("#draft-lines tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("SKU-PAPER-A4")
    expect(rows.nth(0)).to_contain_text("4.99 EUR")
    expect(rows.nth(0)).to_contain_text("948.10 EUR")
    expect(page.locator("#effects")).to_contain_text("1,200 pcs")
    expect(page.locator("#effects")).to_contain_text("1,000 pcs")
    assert '"draft_id": "D-1002"' in page.locator("#arguments").inner_text()
    expect(page.locator("#countdown")).to_have_text(re.compile(r"^1[45]:\d\d$"))
    page.screenshot(path=str(artifacts / "approval-page.png"), full_page=True)

    page.fill("#comment", "ok for Q3")
    page.click("#approve")

    expect(page.locator("#status-pill")).to_have_text("Approved")
    expect(page.locator("#decision-headline")).to_contain_text("Approved by appr-bob")
    expect(page.locator("#outcome-title")).to_have_text("Approved — not executed yet")
    expect(page.locator("#decide-form")).to_have_count(0)
    assert console.fake.decisions[-1] == {"pending_id": record["pending_id"], "action": "approve",
                                          "fingerprint": record["fingerprint"], "comment": "ok for Q3",
                                          "by": "appr-bob"}
    console.fake.operations[record["operation_id"]].update(
        status="committed", committed_at=now().isoformat(),
        result={"order_id": "O-2001", "status": "placed", "total_amount_minor": 123450, "currency": "EUR",
                "paid_minor": 123450, "refunded_minor": 0, "lines": []})
    expect(page.locator("#outcome-title")).to_have_text("Done — executed")
    expect(page.locator("#outcome-detail")).to_contain_text("Order O-2001 · placed · total 1,234.50 EUR")
    page.screenshot(path=str(artifacts / "approval-page-approved.png"), full_page=True)


def test_a_business_rejection_after_approval_says_not_executed(console, new_page):
    record = console.fake.add_approval(submit_order_approval(status="approved", decided_by="appr-x",
                                                             decided_at=now().isoformat()))
    console.fake.operations[record["operation_id"]] = {
        "operation_id": record["operation_id"], "tool": "submit_order", "status": "rejected",
        "error": {"code": "stock_changed", "message": "on-hand of SKU-PAPER-A4 was 1200 when quoted and is 1100 now"}}
    page = new_page(console.base_url, tok("appr-y", "approver"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#outcome-title")).to_have_text("Business rejected — not executed")
    expect(page.locator("#outcome-detail")).to_contain_text("stock_changed")
    expect(page.locator("#approve")).to_have_count(0)


def test_reject_with_a_comment_is_recorded_and_shown(console, new_page):
    record = console.fake.add_approval(submit_order_approval())
    page = new_page(console.base_url, tok("appr-carol", "approver"))
    page.goto(f"/resume/{record['pending_id']}")

    page.fill("#comment", "Wrong customer, use C-1002")
    page.click("#reject")

    expect(page.locator("#status-pill")).to_have_text("Rejected")
    expect(page.locator("#decision-comment")).to_have_text("Wrong customer, use C-1002")
    expect(page.locator("#outcome-title")).to_have_text("Not executed")
    assert console.fake.decisions[-1]["action"] == "reject"
    page.reload()
    expect(page.locator("#decision-headline")).to_contain_text("Rejected by appr-carol")
    expect(page.locator("#no-decision")).to_contain_text("already decided")


@pytest.mark.parametrize("state", ["expired", "past_deadline_not_swept", "already_decided", "superseded"])
def test_an_approval_that_cannot_be_decided_says_why_and_has_no_buttons(console, new_page, state):
    overrides = {
        "expired": {"status": "expired", "expires_at": (now() - timedelta(minutes=1)).isoformat()},
        "past_deadline_not_swept": {"expires_at": (now() - timedelta(seconds=1)).isoformat()},
        "already_decided": {"status": "approved", "decided_by": "someone", "decided_at": now().isoformat()},
        "superseded": {"status": "superseded", "superseded_by": "apr_newer", "decided_at": now().isoformat()},
    }[state]
    record = console.fake.add_approval(submit_order_approval(**overrides))
    page = new_page(console.base_url, tok("appr-d", "approver"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#amount-big")).to_have_text("1,234.50 EUR")
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.locator("#reject")).to_have_count(0)
    expected = {"expired": "expired", "past_deadline_not_swept": "expired", "already_decided": "already decided",
                "superseded": "superseded"}[state]
    expect(page.locator("#no-decision")).to_contain_text(expected)
    if state == "superseded":
        expect(page.locator("#superseded-link")).to_have_attribute("href", "/resume/apr_newer")


def test_buttons_go_away_when_the_deadline_passes_on_the_open_page(console, new_page):
    record = console.fake.add_approval(submit_order_approval(expires_in=3))
    page = new_page(console.base_url, tok("appr-e", "approver"))
    page.goto(f"/resume/{record['pending_id']}")
    expect(page.locator("#approve")).to_be_enabled()

    record["status"] = "expired"  # what the approval service's sweeper records at the deadline

    expect(page.locator("#no-decision")).to_contain_text("expired", timeout=8000)
    expect(page.locator("#approve")).to_have_count(0, timeout=8000)
    expect(page.locator("#status-pill")).to_have_text("Expired")


def test_a_person_without_the_role_is_told_why_they_cannot_decide(console, new_page, artifacts):
    record = console.fake.add_approval(submit_order_approval(required_roles=("manager",)))
    page = new_page(console.base_url, tok("appr-f", "approver"))

    response = page.goto(f"/resume/{record['pending_id']}")

    assert response.status == 404
    expect(page.locator("#approval-denied")).to_contain_text("You do not have a role that may decide this approval")
    page.screenshot(path=str(artifacts / "approval-denied.png"))
    assert "1,234.50" not in page.content()


def test_the_requester_may_look_but_not_decide(console, new_page):
    record = console.fake.add_approval(submit_order_approval(requested_by="req-g"))
    page = new_page(console.base_url, tok("req-g", "requester"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#amount-big")).to_have_text("1,234.50 EUR")
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.locator("#no-decision")).to_contain_text("You do not have a role that may decide this approval")


def test_a_stale_fingerprint_is_explained_and_nothing_is_decided(console, new_page):
    record = console.fake.add_approval(submit_order_approval())
    page = new_page(console.base_url, tok("appr-h", "approver"))
    page.goto(f"/resume/{record['pending_id']}")

    record["fingerprint"] = "sha256:" + "0" * 64  # the operation changed after the page was loaded
    page.click("#approve")

    expect(page.locator("#decide-error")).to_contain_text("changed after this page was loaded")
    assert record["status"] == "pending"


def test_hostile_text_from_the_model_or_a_person_renders_as_text(console, new_page):
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    record = console.fake.add_approval(submit_order_approval(note=f"Note {hostile}", customer_name=f"Evil {hostile}",
                                                             status="rejected", decided_by="appr-i",
                                                             decided_at=now().isoformat(), comment=f"No {hostile}"))
    page = new_page(console.base_url, tok("appr-i", "approver"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#draft-note")).to_have_text(f"Note {hostile}")
    expect(page.locator("#target")).to_have_text(f"Evil {hostile}")
    expect(page.locator("#decision-comment")).to_have_text(f"No {hostile}")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main img").count() == 0
    assert page.locator("main script").count() == 0
