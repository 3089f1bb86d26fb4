"""Whole-stack flows in the browser: the services run as processes (the e2e ``stack``); a requester works
in the console, an approver decides on the approval page, and nothing is faked."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import Api, token, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
SLOW = 30_000  # ms: a model run, a prepare or a commit travels through every service
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def submit_card(page):
    return page.locator(".tool-card", has=page.locator(".tool-name", has_text=re.compile("^submit_order$")))


def say(page, text: str) -> None:
    """Send a chat message (the textarea empties once the gateway accepted it)."""
    page.fill("#composer textarea", text)
    page.click("#composer button")
    expect(page.locator("#composer textarea")).to_have_value("")


def draft_and_submit_from_the_chat(new_page, stack, requester: Api):
    """The requester drafts and submits an order in the console; returns their page and the approval link."""
    page = new_page(stack.base_url, token(requester.sub, "requester"))
    page.click("#new-session button")
    expect(page.locator("#stream-state")).to_have_text("live")
    say(page, "draft for C-1001: SKU-PAPER-A4 x2")
    draft = page.locator(".tool-card", has=page.locator(".tool-name", has_text="create_order_draft"))
    expect(draft.locator(".pill")).to_have_text("Done", timeout=SLOW)
    expect(page.locator("#run-state")).to_be_hidden(timeout=SLOW)  # the run answered; the next may start
    say(page, "submit")
    card = submit_card(page)
    expect(card.locator(".pill")).to_have_text("Awaiting approval", timeout=SLOW)
    expect(page.locator("#run-state-text")).to_contain_text("Waiting for an approval decision")
    link = card.locator('[data-stage="approval_pending"] a').get_attribute("href")
    assert re.fullmatch(r"/resume/[^/]+", link)
    return page, link


def test_an_order_drafted_in_the_chat_is_approved_on_the_approval_page_and_committed(
        stack, new_page, requester: Api, approver: Api, artifacts):
    page, link = draft_and_submit_from_the_chat(new_page, stack, requester)
    reviewer = new_page(stack.base_url, token(approver.sub, "approver"))

    reviewer.goto(link)

    expect(reviewer.locator("#operation")).to_have_text("Submit order")
    expect(reviewer.locator("#amount-big")).to_have_text(re.compile(r"^\d{1,3}(,\d{3})*\.\d\d EUR$"))
    expect(reviewer.locator("#requester")).to_have_text(requester.sub)
    lines = reviewer.locator("#draft-lines tbody tr")
    expect(lines).to_have_count(1)
    expect(lines.nth(0)).to_contain_text("SKU-PAPER-A4")
    expect(reviewer.locator("#countdown")).to_have_text(re.compile(r"^1[45]:\d\d$"))
    reviewer.screenshot(path=str(artifacts / "approval-page-e2e.png"), full_page=True)
    reviewer.click("#approve")
    expect(reviewer.locator("#status-pill")).to_have_text("Approved")
    expect(reviewer.locator("#outcome-title")).to_have_text("Done — executed", timeout=SLOW)

    card = submit_card(page)
    expect(card.locator(".pill")).to_have_text("Done", timeout=SLOW)
    expect(card.locator('[data-stage="approval_resolved"]')).to_contain_text(f"Approved by {approver.sub}")
    finished = card.locator('[data-stage="tool_finished"]')
    expect(finished).to_have_attribute("data-outcome", "succeeded")
    order_id = re.search(r"Order (\S+) ·", finished.inner_text())[1]  # the server's result line
    order = requester.get(f"/v1/erp/orders/{order_id}")
    assert order.status_code == 200 and order.json()["lines"][0]["qty"] == 2
    page.screenshot(path=str(artifacts / "console-e2e.png"))


def test_a_rejection_with_a_comment_shows_in_the_requesters_timeline(stack, new_page, requester: Api, approver: Api):
    page, link = draft_and_submit_from_the_chat(new_page, stack, requester)
    reviewer = new_page(stack.base_url, token(approver.sub, "approver"))
    reviewer.goto(link)

    reviewer.fill("#comment", "Use C-1002: Acme moved")
    reviewer.click("#reject")

    expect(reviewer.locator("#status-pill")).to_have_text("Rejected")
    expect(reviewer.locator("#outcome-title")).to_have_text("Not executed")
    card = submit_card(page)
    expect(card.locator(".pill")).to_have_text("Not executed", timeout=SLOW)
    expect(card.locator('[data-stage="approval_resolved"]')).to_contain_text(f"Rejected by {approver.sub}")
    expect(card.locator(".comment")).to_have_text("Use C-1002: Acme moved")


def test_an_expired_approval_offers_no_buttons(stack, new_page, requester: Api, manager: Api):
    session_id = requester.new_session()
    started = requester.call(session_id, "adjust_stock", {"sku": "SKU-PAPER-A4", "delta": 5, "reason": "recount"})
    assert started.status_code == 202, started.text
    pending_id = started.json()["pending_id"]
    wait_for(lambda: manager.get(f"/v1/approvals/{pending_id}").json().get("status") == "expired", timeout=10)

    reviewer = new_page(stack.base_url, token(manager.sub, "manager"))
    reviewer.goto(f"/resume/{pending_id}")

    expect(reviewer.locator("#status-pill")).to_have_text("Expired")
    expect(reviewer.locator("#no-decision")).to_contain_text("expired")
    expect(reviewer.locator("#approve")).to_have_count(0)
    expect(reviewer.locator("#reject")).to_have_count(0)
    page = new_page(stack.base_url, token(requester.sub, "requester"))
    page.goto(f"/#sessions/{session_id}")
    card = page.locator(".tool-card", has=page.locator(".tool-name", has_text="adjust_stock"))
    expect(card.locator(".pill")).to_have_text("Not executed", timeout=SLOW)
    expect(card.locator('[data-stage="approval_resolved"]')).to_contain_text("Expired")


def test_a_note_with_a_script_tag_renders_as_text(stack, new_page, requester: Api, approver: Api):
    session_id = requester.new_session()
    draft = requester.call(session_id, "create_order_draft", {
        "customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A4", "qty": 1}], "note": HOSTILE})
    assert draft.status_code == 200 and draft.json()["outcome"] == "succeeded", draft.text
    revision = draft.json()["result"]
    submitted = requester.call(session_id, "submit_order",
                               {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    assert submitted.status_code == 202, submitted.text

    reviewer = new_page(stack.base_url, token(approver.sub, "approver"))
    reviewer.goto(f"/resume/{submitted.json()['pending_id']}")
    expect(reviewer.locator("#draft-note")).to_have_text(HOSTILE)
    page = new_page(stack.base_url, token(requester.sub, "requester"))
    page.goto(f"/#sessions/{session_id}")
    draft_card = page.locator(".tool-card", has=page.locator(".tool-name", has_text="create_order_draft"))
    draft_card.locator("summary").first.click()
    expect(draft_card.locator("pre.json").first).to_contain_text("<script>window.__pwned = 1</script>")

    time.sleep(0.3)
    for each in (reviewer, page):
        assert each.evaluate("window.__pwned") is None
        assert each.locator("main img, main script").count() == 0


def test_an_admin_sees_the_audit_trail_of_a_decided_approval_and_the_approver_does_not(
        stack, new_page, requester: Api, approver: Api, admin: Api, artifacts):
    _, link = draft_and_submit_from_the_chat(new_page, stack, requester)
    reviewer = new_page(stack.base_url, token(approver.sub, "approver"))
    reviewer.goto(link)
    reviewer.click("#approve")
    expect(reviewer.locator("#outcome-title")).to_have_text("Done — executed", timeout=SLOW)
    pending_id = link.rsplit("/", 1)[1]

    def rows_through_the_commit():  # the commit's outcome reaches the audit log after the page shows it
        items = admin.get("/v1/audit", pending_id=pending_id).json()["items"]
        return items if "commit_outcome" in {row["kind"] for row in items} else None

    api_rows = wait_for(rows_through_the_commit)

    page = new_page(stack.base_url, token(admin.sub, "admin"))
    page.goto(link)

    rows = page.locator("#audit-trail #audit-rows tbody tr")
    expect(rows).to_have_count(len(api_rows))
    for index, row in enumerate(api_rows):
        expect(rows.nth(index)).to_have_attribute("data-kind", row["kind"])
        expect(rows.nth(index).locator("td").nth(0)).to_have_text(str(row["seq"]))
        expect(rows.nth(index).locator("td").nth(4)).to_have_text(row["hash"][:12] + "…")
    assert {"request", "decision"} <= {row["kind"] for row in api_rows}
    page.screenshot(path=str(artifacts / "approval-page-audit-trail-e2e.png"), full_page=True)
    reviewer.reload()
    expect(reviewer.locator("#operation")).to_have_text("Submit order")
    expect(reviewer.locator("#audit-trail")).to_have_count(0)
    assert api_rows[0]["hash"][:12] not in reviewer.content()
