"""The approval page's audit trail (admins only) in Chromium against the real gateway, other services faked."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.harness import submit_order_approval, tok

pytestmark = pytest.mark.browser


def test_an_admin_sees_the_approvals_audit_rows_after_a_decision(console, new_page, artifacts):
    record = console.fake.add_approval(submit_order_approval(requested_by="req-audit"))
    reviewer = new_page(console.base_url, tok("appr-audit", "approver"))
    reviewer.goto(f"/resume/{record['pending_id']}")
    reviewer.fill("#comment", "fine")
    reviewer.click("#approve")
    expect(reviewer.locator("#status-pill")).to_have_text("Approved")
    expected = [row for row in console.fake.audit if row["pending_id"] == record["pending_id"]]
    assert [row["kind"] for row in expected] == ["request", "decision"]

    admin = new_page(console.base_url, tok("ada", "admin"))
    admin.goto(f"/resume/{record['pending_id']}")

    trail = admin.locator("#audit-trail")
    expect(trail.locator("h2")).to_have_text("Audit trail")
    rows = trail.locator("#audit-rows tbody tr")
    expect(rows).to_have_count(2)
    for index, row in enumerate(expected):
        cells = rows.nth(index).locator("td")
        expect(cells.nth(0)).to_have_text(str(row["seq"]))
        expect(cells.nth(2)).to_have_text(row["kind"])
        expect(cells.nth(3)).to_have_text(row["actor"])
        expect(cells.nth(4)).to_have_text(row["hash"][:12] + "…")
        time_el = cells.nth(1).locator("time[data-local]")
        expect(time_el).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
        # localised by the page's script like the other dates: the server's UTC text moves to the title
        expect(time_el).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
        expect(time_el).not_to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    admin.screenshot(path=str(artifacts / "approval-page-audit-trail.png"), full_page=True)


def test_a_non_admin_sees_no_audit_trail_and_the_page_does_not_carry_it(console, new_page):
    record = console.fake.add_approval(submit_order_approval(requested_by="req-audit-2"))
    reviewer = new_page(console.base_url, tok("appr-audit-2", "approver"))
    reviewer.goto(f"/resume/{record['pending_id']}")
    reviewer.click("#approve")
    expect(reviewer.locator("#status-pill")).to_have_text("Approved")
    hashes = [row["hash"] for row in console.fake.audit if row["pending_id"] == record["pending_id"]]

    for token in (tok("appr-audit-2", "approver"), tok("req-audit-2", "requester")):
        page = new_page(console.base_url, token)
        page.goto(f"/resume/{record['pending_id']}")
        expect(page.locator("#operation")).to_have_text("Submit order")
        expect(page.locator("#audit-trail")).to_have_count(0)
        html = page.content()
        assert "Audit trail" not in html
        assert not any(h[:12] in html for h in hashes)
        status = httpx.get(f"{console.base_url}/resume/{record['pending_id']}/status",
                           headers={"Authorization": f"Bearer {token}"})
        assert status.status_code == 200 and not any(h[:12] in status.text for h in hashes)


def test_the_http_route_and_the_page_show_the_same_rows(console):
    record = console.fake.add_approval(submit_order_approval(requested_by="req-audit-3"))
    admin = {"Authorization": f"Bearer {tok('ada', 'admin')}"}

    api = httpx.get(f"{console.base_url}/v1/audit", params={"pending_id": record["pending_id"]}, headers=admin)
    html = httpx.get(f"{console.base_url}/resume/{record['pending_id']}", headers=admin).text
    refused = httpx.get(f"{console.base_url}/v1/audit", params={"pending_id": record["pending_id"]},
                        headers={"Authorization": f"Bearer {tok('appr', 'approver')}"})

    assert api.status_code == 200 and [row["kind"] for row in api.json()["items"]] == ["request"]
    assert api.json()["items"][0]["hash"][:12] in html and 'id="audit-trail"' in html
    assert refused.status_code == 403
