"""Daily use in the console, whole stack as processes (SPEC §9): sessions listed by the server with
search (yesterday's too, under a page of newer ones), chatting while an approval waits, cancelling the
waiting request, and approving on the approval page with readable money, units and dates and the reason
a person may not approve instead of a button that would fail."""

from __future__ import annotations

import re
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from erpilot_platform.testing.backends import execute_sql
from tests.browser.test_flows import SLOW, draft_and_submit_from_the_chat, say, submit_card
from tests.e2e.conftest import Api, token
from tests.e2e.test_model_runs import run_events, start_run
from tests.e2e.test_write_flow import place_order, request_write

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


def test_yesterdays_session_is_found_under_newer_ones_and_opens_with_its_history(stack, new_page, requester: Api,
                                                                                 artifacts):
    yesterday = requester.post("/v1/sessions", {"title": "Acme order, yesterday"}).json()["session_id"]
    run_events(requester, yesterday, start_run(requester, yesterday, "draft for C-1001: SKU-PAPER-A4 x2"))
    execute_sql(stack.database_url, "update agent.sessions set created_at = created_at - interval '1 day' "
                                    f"where session_id = '{yesterday}'")  # made yesterday, in another browser
    for n in range(50):  # a full first page of newer sessions
        requester.post("/v1/sessions", {"title": f"Today {n:02d}"})
    page = new_page(stack.base_url, token(requester.sub, "requester"))  # a fresh browser: nothing stored

    titles = page.locator("#session-list li .session-title")
    expect(titles).to_have_count(50)
    expect(titles.filter(has_text="Acme order, yesterday")).to_have_count(0)
    page.click("#session-more")
    expect(titles).to_have_count(51)
    expect(titles.last).to_have_text("Acme order, yesterday")
    expect(page.locator("#session-more")).to_be_hidden()

    page.fill("#session-search input[name=q]", "acme")  # or straight away, by searching
    expect(titles).to_have_text(["Acme order, yesterday"])
    page.locator("#session-list li a", has_text="Acme order, yesterday").click()

    expect(page.locator("#session-title")).to_have_text("Acme order, yesterday")
    expect(page.locator(".message-user").first).to_contain_text("draft for C-1001: SKU-PAPER-A4 x2")
    card = page.locator(".tool-card", has=page.locator(".tool-name", has_text="create_order_draft"))
    expect(card.locator(".pill")).to_have_text("Done")
    page.screenshot(path=str(artifacts / "console-yesterdays-session.png"))


def test_a_refund_is_approved_from_the_page_with_readable_money_units_and_dates_not_by_its_requester(
        stack, browser, approver: Api, artifacts):
    mia = Api(stack.base_url, f"req-mgr-{time.monotonic_ns()}", "requester", "manager")
    carol = Api(stack.base_url, f"mgr-{time.monotonic_ns()}", "manager")
    session_id = mia.new_session()
    order = place_order(mia, approver, session_id, [("SKU-PAPER-A4", 3)])
    refund = request_write(mia, session_id, "refund_payment", {
        "order_id": order["order_id"], "amount_minor": 250, "currency": "EUR", "channel": "original"})
    link = f"/resume/{refund['pending_id']}"

    def signed_in(api: Api, **options):
        context = browser.new_context(base_url=stack.base_url, viewport={"width": 1360, "height": 1000}, **options)
        context.set_default_timeout(15_000)
        context.add_cookies([{"name": "erpilot_token", "value": token(api.sub, *roles[api.sub]),
                              "url": stack.base_url}])
        contexts.append(context)
        return context.new_page()

    roles = {mia.sub: ("requester", "manager"), carol.sub: ("manager",)}
    contexts = []
    try:
        own = signed_in(mia)
        own.goto(link)
        expect(own.locator("#no-decision")).to_have_attribute("data-reason", "separation_of_duties")
        expect(own.locator("#no-decision")).to_contain_text("another person must approve it")
        expect(own.locator("#approve")).to_have_count(0)  # no button that would answer 403
        expect(own.locator("#reject")).to_be_visible()
        own.screenshot(path=str(artifacts / "approval-e2e-separation-of-duties.png"), full_page=True)

        page = signed_in(carol, locale="de-DE", timezone_id="Asia/Tokyo")
        page.goto(link)
        expect(page.locator("#no-decision")).to_be_hidden()
        expect(page.locator("#amount-big")).to_have_text("2.50 EUR")
        total = f"{order['total_amount_minor'] // 100:,}.{order['total_amount_minor'] % 100:02d} EUR"
        remaining = page.locator("#effects tbody tr", has_text="remaining")
        expect(remaining).to_have_attribute("data-unit", "EUR")
        expect(remaining).to_contain_text(total)
        deadline = datetime.fromisoformat(refund["expires_at"]).astimezone(ZoneInfo("Asia/Tokyo"))
        german_date = f"{deadline.day:02d}.{deadline.month:02d}.{deadline.year}"  # de-DE, in Tokyo time
        expect(page.locator("#deadline time")).to_contain_text(german_date)
        expect(page.locator("#deadline time")).to_contain_text(deadline.strftime("%H:%M:%S"))
        paid = page.locator("#details dt", has_text=re.compile("^paid$")).locator("xpath=following-sibling::dd[1]")
        expect(paid).to_have_text(total)  # money, never bare minor units
        page.screenshot(path=str(artifacts / "approval-e2e-readable.png"), full_page=True)

        page.click("#approve")
        expect(page.locator("#status-pill")).to_have_text("Approved")
        expect(page.locator("#outcome-title")).to_have_text("Done — executed", timeout=SLOW)
    finally:
        for context in contexts:
            context.close()
    assert mia.get(f"/v1/erp/orders/{order['order_id']}").json()["refunded_minor"] == 250
