"""The inbox approves a selection in one all-or-nothing decision, showing the total selected; the approval page
shows a quorum approval's votes. The gateway is real, its services are the harness fake."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.harness import now, submit_order_approval
from tests.browser.test_console_approval_reasons import refund_approval, tok

pytestmark = pytest.mark.browser


def row(page, record):
    return page.locator(f"tr[data-pending-id='{record['pending_id']}']")


def test_the_inbox_approves_the_selection_together_and_shows_its_total(console, open_page, artifacts):
    order = console.fake.add_approval(submit_order_approval(requested_by="req-a"))  # 1,234.50 EUR
    refund = console.fake.add_approval(refund_approval(requested_by="req-b", amount_minor=2500))  # 25.00 EUR
    left = console.fake.add_approval(refund_approval(requested_by="req-c", amount_minor=700))
    page = open_page(console, tok("mgr-bulk", "manager"))
    page.goto("/#approvals")

    expect(page.locator("#bulk-approve")).to_be_disabled()
    row(page, order).locator(".bulk-pick").check()
    expect(page.locator("#bulk-summary")).to_have_text("1 selected · total 1,234.50 EUR")
    row(page, refund).locator(".bulk-pick").check()
    expect(page.locator("#bulk-summary")).to_have_text("2 selected · total 1,259.50 EUR")
    expect(page.locator("#bulk-approve")).to_have_text("Approve 2 selected")
    page.screenshot(path=str(artifacts / "inbox-bulk-selection.png"), full_page=True)

    page.click("#bulk-approve")

    expect(page.locator("#bulk-result")).to_have_text("Approved 2 approvals together (total 1,259.50 EUR).")
    expect(row(page, order)).to_have_count(0)
    expect(row(page, refund)).to_have_count(0)
    expect(row(page, left)).to_be_visible()
    assert console.fake.bulk_decisions[-1] == [order["pending_id"], refund["pending_id"]]
    assert (order["status"], refund["status"], left["status"]) == ("approved", "approved", "pending")
    expect(page.locator("#bulk-summary")).to_have_text("Select approvals to approve them together.")


def test_one_changed_approval_in_the_selection_approves_none_and_is_named(console, open_page):
    first = console.fake.add_approval(submit_order_approval(requested_by="req-d"))
    changed = console.fake.add_approval(refund_approval(requested_by="req-e", amount_minor=900))
    page = open_page(console, tok("mgr-stale", "manager"))
    page.goto("/#approvals")
    row(page, first).locator(".bulk-pick").check()
    row(page, changed).locator(".bulk-pick").check()
    changed["fingerprint"] = "sha256:" + "9" * 64  # edited elsewhere after the inbox was loaded

    page.click("#bulk-approve")

    result = page.locator("#bulk-result")
    expect(result).to_contain_text(f"Nothing was approved ({changed['pending_id']}): stale_fingerprint")
    expect(result).to_have_class("bulk-result error")
    assert (first["status"], changed["status"]) == ("pending", "pending")
    expect(row(page, first)).to_be_visible()


def test_the_approval_page_shows_the_votes_of_a_quorum_approval(console, open_page, artifacts):
    voted_at = (now() - timedelta(minutes=2)).isoformat()
    record = console.fake.add_approval(refund_approval(
        requested_by="req-q", amount_minor=150_000, approvals_required=2, approvals_received=1,
        votes=[{"sub": "mgr-first", "role": "manager", "action": "approve", "at": voted_at,
                "comment": "checked the invoice"}]))
    console.fake.voted = {(record["pending_id"], "mgr-first")}
    page = open_page(console, tok("mgr-second", "manager"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#quorum")).to_have_text("1 of 2 needed")
    votes = page.locator("#votes tbody tr")
    expect(votes).to_have_count(1)
    expect(votes.nth(0)).to_contain_text("mgr-first")
    expect(votes.nth(0)).to_contain_text("checked the invoice")
    expect(votes.nth(0)).to_have_attribute("data-action", "approve")
    expect(page.locator("#approve")).to_be_visible()
    page.screenshot(path=str(artifacts / "approval-quorum-votes.png"), full_page=True)

    first = open_page(console, tok("mgr-first", "manager"))
    first.goto(f"/resume/{record['pending_id']}")
    expect(first.locator("#no-decision")).to_have_attribute("data-reason", "already_voted")
    expect(first.locator("#approve")).to_have_count(0)


def test_the_approval_page_shows_new_votes_without_a_reload(console, open_page):
    record = console.fake.add_approval(refund_approval(
        requested_by="req-live", amount_minor=150_000, approvals_required=3, approvals_received=0, votes=[]))
    page = open_page(console, tok("mgr-live", "manager"))
    page.goto(f"/resume/{record['pending_id']}")
    expect(page.locator("#quorum")).to_have_text("0 of 3 needed")
    expect(page.locator("#votes-card")).to_be_hidden()
    page.evaluate("window.__loaded_once = true")  # gone if the page reloads

    # another manager votes elsewhere: the page's status poll shows it
    record["votes"].append({"sub": "mgr-elsewhere", "role": "manager", "action": "approve",
                            "at": now().isoformat(), "comment": "invoice matches"})
    record["approvals_received"] = 1
    votes = page.locator("#votes tbody tr")
    expect(votes).to_have_count(1)
    expect(votes.nth(0)).to_contain_text("mgr-elsewhere")
    expect(votes.nth(0)).to_contain_text("invoice matches")
    expect(page.locator("#quorum")).to_have_text("1 of 3 needed")

    # this person's own vote: counted, the form gives way to a note, still no reload
    page.fill("textarea[name=comment]", "agreed")
    page.click("#approve")
    expect(votes).to_have_count(2)
    expect(votes.nth(1)).to_contain_text("mgr-live")
    expect(votes.nth(1)).to_have_attribute("data-action", "approve")
    expect(page.locator("#quorum")).to_have_text("2 of 3 needed")
    expect(page.locator("#no-decision")).to_contain_text("You have voted on this approval")
    expect(page.locator("#approve")).to_have_count(0)
    assert page.evaluate("window.__loaded_once") is True
