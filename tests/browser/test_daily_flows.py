"""Daily use in the console, whole stack as processes (SPEC §9): sessions listed by the server with
search, chatting while an approval waits, and cancelling the waiting request."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_flows import SLOW, draft_and_submit_from_the_chat, say, submit_card
from tests.e2e.conftest import Api, token

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_sessions_created_through_the_api_are_listed_and_searchable(stack, new_page, requester: Api, artifacts):
    for title in ("Paper for Acme", "Pens for Globex", "More paper"):
        requester.post("/v1/sessions", {"title": title})
    page = new_page(stack.base_url, token(requester.sub, "requester"))  # a fresh browser: nothing stored

    items = page.locator("#session-list li .session-title")
    expect(items).to_have_text(["More paper", "Pens for Globex", "Paper for Acme"])
    page.fill("#session-search input[name=q]", "paper")
    expect(items).to_have_text(["More paper", "Paper for Acme"])
    page.screenshot(path=str(artifacts / "console-session-search.png"))
    page.fill("#session-search input[name=q]", "nothing like this")
    expect(items).to_have_count(0)
    expect(page.locator("#session-list-empty")).to_contain_text("nothing like this")
    page.fill("#session-search input[name=q]", "")
    expect(items).to_have_count(3)
    page.locator("#session-list li a", has_text="Pens for Globex").click()
    expect(page.locator("#session-title")).to_have_text("Pens for Globex")


def test_chatting_while_an_approval_waits_and_then_cancelling_it(stack, new_page, requester: Api,
                                                                 approver: Api, artifacts):
    page, link = draft_and_submit_from_the_chat(new_page, stack, requester)
    pending_id = link.rsplit("/", 1)[1]

    say(page, "find product pen")  # accepted: the waiting run does not block the session
    expect(page.locator(".message-agent").last).to_contain_text("SKU-PEN-BLUE", timeout=SLOW)
    expect(submit_card(page).locator(".pill")).to_have_text("Awaiting approval")
    expect(page.locator("#composer-error")).to_be_hidden()
    page.screenshot(path=str(artifacts / "console-chat-while-waiting.png"))

    submit_card(page).locator("button.cancel-run").click()

    card = submit_card(page)
    expect(card.locator(".pill")).to_have_text("Not executed", timeout=SLOW)
    expect(card.locator('[data-stage="approval_withdrawn"]')).to_contain_text(f"Withdrawn by {requester.sub}")
    expect(card.locator("button.cancel-run")).to_have_count(0)
    expect(page.locator(".system.error").last).to_contain_text("cancelled")
    page.screenshot(path=str(artifacts / "console-cancel-waiting-run.png"))
    assert pending_id not in [a["pending_id"] for a in approver.get("/v1/approvals").json()["items"]]
    assert approver.get(f"/v1/approvals/{pending_id}").json()["status"] == "withdrawn"
