"""Escalation in the console (SPEC §10), in Chromium against the real gateway, its services faked: the inbox marks
an escalated approval with an "escalated" badge (also one that escalates while the inbox is open), the approval
page says to whom and when, and the session timeline shows the escalation in the call's card."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.harness import now, submit_order_approval, tok

pytestmark = pytest.mark.browser


def row(page, record):
    return page.locator(f"tr[data-pending-id='{record['pending_id']}']")


def test_the_inbox_badges_escalated_approvals_even_one_that_escalates_while_it_is_open(console, open_page,
                                                                                        artifacts):
    console.fake.approvals.clear()
    escalated_at = (now() - timedelta(minutes=2)).isoformat()
    escalated = console.fake.add_approval(submit_order_approval(
        requested_by="req-esc", required_roles=("approver", "manager"), escalate_to="manager",
        escalated_at=escalated_at))
    quiet = console.fake.add_approval(submit_order_approval(requested_by="req-quiet", required_roles=("approver",
                                                                                                      "manager")))
    page = open_page(console, tok("mgr-esc", "manager"))
    page.goto("/#approvals")

    expect(row(page, escalated).locator(".pill.escalated")).to_have_text("escalated")
    expect(row(page, quiet)).to_be_visible()
    expect(row(page, quiet).locator(".pill.escalated")).to_have_count(0)
    page.screenshot(path=str(artifacts / "inbox-escalated.png"), full_page=True)

    quiet.update(escalate_to="manager", escalated_at=now().isoformat())  # the sweeper escalates it meanwhile
    expect(row(page, quiet).locator(".pill.escalated")).to_have_text("escalated")


def test_the_approval_page_says_it_escalated_and_that_the_deadline_stands(console, open_page):
    record = console.fake.add_approval(submit_order_approval(
        requested_by="req-esc2", required_roles=("approver", "manager"), escalate_to="manager",
        escalated_at=(now() - timedelta(seconds=30)).isoformat()))
    page = open_page(console, tok("mgr-esc2", "manager"))
    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#escalated")).to_contain_text("escalated to manager at")
    expect(page.locator("#escalated")).to_contain_text("the deadline is unchanged")
    expect(page.locator("#may-decide")).to_have_text("approver, manager")


def test_the_timeline_shows_the_escalation_in_the_calls_card(console, new_page):
    sid = console.new_session("req-esc3", "Escalation")
    page = new_page(console.base_url, tok("req-esc3", "requester"))
    page.goto(f"/#sessions/{sid}")
    expect(page.locator("#stream-state")).to_have_text("live")
    expires = (now() + timedelta(minutes=15)).isoformat()
    console.publish(sid, ("tool_started", {"call_id": "c-esc", "tool": "submit_order", "arguments": {}}),
                    ("approval_pending", {"call_id": "c-esc", "pending_id": "apr_esc", "fingerprint": "sha256:ee",
                                          "expires_at": expires, "preview": submit_order_approval()["preview"],
                                          "approval_url": "x"}),
                    ("approval_escalated", {"call_id": "c-esc", "pending_id": "apr_esc", "escalated_to": "manager",
                                            "required_roles": ["approver", "manager"],
                                            "escalated_at": now().isoformat(), "expires_at": expires}))

    the_card = page.locator('.tool-card[data-call-id="c-esc"]')
    expect(the_card.locator('[data-stage="approval_escalated"]')).to_contain_text(
        "Escalated — a manager may now decide it too")
    expect(the_card.locator(".pill")).to_have_text("Awaiting approval")  # still waiting, countdown and all
    expect(the_card.locator(".countdown")).to_have_count(1)
