"""The approval page shows the agent's reason labelled "the agent says", in a card of its own apart from the
ledger's preview (issue 34): the agent's claim, never mistaken for what would happen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.harness import submit_order_approval, tok

pytestmark = pytest.mark.browser
CLAIM = "The customer <b>asked</b> for this by phone at 9:00; it replaces order O-1001."


def test_the_agents_reason_is_shown_as_the_agents_words_apart_from_the_preview(console, open_page, artifacts):
    record = console.fake.add_approval(submit_order_approval(requested_by="req-reason", agent_reason=CLAIM))
    page = open_page(console, tok("apr-reason", "approver"))

    page.goto(f"/resume/{record['pending_id']}")

    card = page.locator("#agent-says")
    expect(card.locator("h2")).to_have_text("The agent says")
    expect(page.locator("#agent-reason")).to_have_text(CLAIM)  # as text: the agent's markup is not rendered
    expect(card.locator("b")).to_have_count(0)
    expect(page.locator("#notes")).not_to_contain_text("phone")  # the preview's notes are the ledger's alone
    page.screenshot(path=str(artifacts / "approval-agent-says.png"), full_page=True)


def test_without_a_reason_there_is_no_such_card(console, open_page):
    record = console.fake.add_approval(submit_order_approval(requested_by="req-reason"))
    page = open_page(console, tok("apr-reason", "approver"))

    page.goto(f"/resume/{record['pending_id']}")

    expect(page.locator("#operation")).to_be_visible()
    expect(page.locator("#agent-says")).to_have_count(0)
