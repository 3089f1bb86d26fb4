"""Delegation in the console (SPEC §10), in Chromium against the real gateway, its services faked: the delegations
page gives and revokes through the API; a delegate finds the approval in the inbox "for" the delegator and decides
it on the approval page; "decided by Ana for Bob" wherever a decision or a vote is shown."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.harness import now, submit_order_approval, tok

pytestmark = pytest.mark.browser


def card(page, call_id: str):
    return page.locator(f'.tool-card[data-call-id="{call_id}"]')


def test_the_delegations_page_gives_and_revokes_and_the_delegate_sees_what_they_received(console, open_page,
                                                                                         artifacts):
    page = open_page(console, tok("bob-away", "manager"), timezone_id="UTC")
    page.goto("/console/delegations")
    expect(page.locator("#given-empty")).to_be_visible()

    page.fill("#give-to", "ana-desk")
    friday = (now() + timedelta(days=3)).replace(second=0, microsecond=0)
    page.fill("#give-until", friday.strftime("%Y-%m-%dT%H:%M"))  # the browser's zone is UTC here
    page.check("input[name=tools][value=submit_order]")
    page.click("#give")

    row = page.locator("#given tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("ana-desk")
    expect(row).to_contain_text("submit_order")
    expect(row).to_contain_text("manager")
    [give] = console.fake.delegation_commands[-1:]
    assert (give.actor.sub, give.to, give.tools, give.until) == ("bob-away", "ana-desk", ["submit_order"], friday)
    page.screenshot(path=str(artifacts / "delegations-page.png"), full_page=True)

    delegate = open_page(console, tok("ana-desk", "requester"))
    delegate.goto("/console/delegations")
    expect(delegate.locator("#received tbody tr")).to_contain_text("bob-away")
    expect(delegate.locator("#give-form")).to_have_count(0)  # a requester gives nothing
    expect(delegate.locator("#tab-delegations")).to_be_visible()

    page.click("#given button.revoke")
    expect(page.locator("#given-empty")).to_be_visible()
    revoked = console.fake.delegation_commands[-1]
    assert (revoked.actor.sub, revoked.delegation_id) == ("bob-away", give.delegation_id)
    delegate.reload()
    expect(delegate.locator("#received-empty")).to_be_visible()


def test_a_refused_delegation_is_explained_and_nothing_is_listed(console, open_page):
    page = open_page(console, tok("bob-self", "approver"))
    page.goto("/console/delegations")
    page.fill("#give-to", "bob-self")
    page.fill("#give-until", (now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"))
    page.click("#give")

    expect(page.locator("#give-error")).to_contain_text("delegation_to_self")
    expect(page.locator("#given-empty")).to_be_visible()


def test_a_delegate_decides_in_the_inbox_and_on_the_page_and_it_reads_decided_by_ana_for_bob(console, open_page,
                                                                                              artifacts):
    console.fake.approvals.clear()
    theirs = console.fake.add_approval(submit_order_approval(requested_by="req-del", required_roles=("manager",)))
    console.fake.delegations["dlg_page"] = {
        "schema_version": 1, "delegation_id": "dlg_page", "from": "bob-mgr", "to": "ana-del", "tools": None,
        "until": (now() + timedelta(days=1)).isoformat(), "roles": ["manager"], "created_at": now().isoformat(),
        "revoked_at": None}
    page = open_page(console, tok("ana-del", "requester"))  # no deciding role of her own

    page.goto("/#approvals")  # the inbox is hers to see as a delegate
    row = page.locator(f"tr[data-pending-id='{theirs['pending_id']}']")
    expect(row.locator(".pill.delegated")).to_have_text("for bob-mgr")

    page.goto(f"/resume/{theirs['pending_id']}")
    expect(page.locator("#deciding-for")).to_contain_text("You decide as bob-mgr's delegate")
    page.click("#approve")
    expect(page.locator("#decision-headline")).to_have_text("Approved by ana-del for bob-mgr")
    assert (theirs["decided_by"], theirs["decided_on_behalf_of"]) == ("ana-del", "bob-mgr")
    page.reload()  # as the server renders it
    expect(page.locator("#decision-headline")).to_have_text("Approved by ana-del for bob-mgr")
    page.screenshot(path=str(artifacts / "approval-decided-for.png"), full_page=True)


def test_votes_and_the_timeline_say_for_whom(console, new_page, open_page):
    voted_at = (now() - timedelta(minutes=1)).isoformat()
    record = console.fake.add_approval(submit_order_approval(
        requested_by="req-q2", required_roles=("manager",), approvals_required=2, approvals_received=1,
        votes=[{"sub": "ana-q", "role": "manager", "action": "approve", "at": voted_at, "comment": None,
                "on_behalf_of": "bob-q"}]))
    page = open_page(console, tok("mgr-q", "manager"))
    page.goto(f"/resume/{record['pending_id']}")
    expect(page.locator("#votes tbody tr").nth(0).locator("td").nth(0)).to_have_text("ana-q for bob-q")

    sid = console.new_session("req-tl2", "Delegated")
    timeline = new_page(console.base_url, tok("req-tl2", "requester"))
    timeline.goto(f"/#sessions/{sid}")
    expect(timeline.locator("#stream-state")).to_have_text("live")
    console.publish(sid, ("tool_started", {"call_id": "c-del", "tool": "submit_order", "arguments": {}}),
                    ("approval_pending", {"call_id": "c-del", "pending_id": "apr_del", "fingerprint": "sha256:aa",
                                          "expires_at": (now() + timedelta(minutes=15)).isoformat(),
                                          "preview": record["preview"], "approval_url": "x"}),
                    ("approval_vote", {"call_id": "c-del", "pending_id": "apr_del", "sub": "ana-q", "role": "manager",
                                       "action": "approve", "at": voted_at, "comment": None, "on_behalf_of": "bob-q",
                                       "approvals_required": 2, "approvals_received": 1}),
                    ("approval_resolved", {"call_id": "c-del", "pending_id": "apr_del", "status": "approved",
                                           "decided_by": "ana-q", "decided_on_behalf_of": "bob-q"}))
    the_card = card(timeline, "c-del")
    expect(the_card.locator('[data-stage="approval_vote"]')).to_contain_text("Approved by ana-q for bob-q")
    expect(the_card.locator('[data-stage="approval_resolved"]')).to_contain_text("Approved by ana-q for bob-q")
