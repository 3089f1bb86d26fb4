"""The console (GET /): sign-in, sessions, chat, the SSE-fed timeline and the approvals inbox, in Chromium
against the real gateway and a real NATS stream, the agent/approval/ERP answers faked."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.harness import now, submit_order_approval, tok

pytestmark = pytest.mark.browser


def card(page, call_id: str):
    return page.locator(f'.tool-card[data-call-id="{call_id}"]')


def test_the_token_link_signs_in_sets_the_cookie_and_drops_the_token_from_the_url(console, new_page):
    page = new_page(console.base_url, tok("req-link", "requester"))

    expect(page).to_have_url(re.compile(r"/(#sessions)?$"))
    assert "token=" not in page.url
    expect(page.locator("#who-sub")).to_have_text("req-link")
    cookie = {c["name"]: c for c in page.context.cookies()}["erpilot_token"]
    assert cookie["sameSite"] == "Lax" and cookie["path"] == "/"
    page.click(".signout button")
    expect(page.locator("#signin")).to_be_visible()
    assert "erpilot_token" not in {c["name"] for c in page.context.cookies()}


def test_console_pages_carry_a_strict_content_security_policy(console):
    signed_in = httpx.get(console.base_url + "/", cookies={"erpilot_token": tok("req-csp", "requester")})
    bad_link = httpx.get(console.base_url + "/", params={"token": "nonsense"})

    csp = signed_in.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp and "default-src 'none'" in csp
    assert signed_in.headers["x-frame-options"] == "DENY"
    assert "<script>" not in signed_in.text  # scripts only as files
    assert bad_link.status_code == 401 and "invalid or has expired" in bad_link.text
    assert "set-cookie" not in bad_link.headers
    cross_site = httpx.post(console.base_url + "/console/sign-in", data={"token": tok("x", "requester")},
                            headers={"Origin": "https://evil.example"})
    assert cross_site.status_code == 403


def test_a_new_session_is_remembered_and_a_message_is_sent(console, new_page):
    page = new_page(console.base_url, tok("req-chat", "requester"))

    page.fill("#new-session input[name=title]", "Paper for Acme")
    page.click("#new-session button")

    expect(page.locator("#session-title")).to_have_text("Paper for Acme")
    session_id = page.locator("#session-id").inner_text()
    assert console.fake.sessions[session_id]["owner"] == "req-chat"
    expect(page.locator("#stream-state")).to_have_text("live")
    page.fill("#composer textarea", "draft for C-1001: SKU-PAPER-A4 x2")
    page.press("#composer textarea", "Enter")
    expect(page.locator("#composer textarea")).to_have_value("")
    assert console.fake.messages[-1] == {"session_id": session_id, "text": "draft for C-1001: SKU-PAPER-A4 x2"}
    page.reload()
    expect(page.locator("#session-list li")).to_have_count(1)
    expect(page.locator("#session-list li .session-title")).to_have_text("Paper for Acme")


def test_the_timeline_shows_each_stage_and_tells_approved_from_done(console, new_page, artifacts):
    sid = console.new_session("req-tl", "Timeline")
    page = new_page(console.base_url, tok("req-tl", "requester"))
    page.goto(f"/#sessions/{sid}")
    expect(page.locator("#stream-state")).to_have_text("live")
    preview = submit_order_approval()["preview"]
    expires = (now() + timedelta(minutes=15)).isoformat()

    console.publish(sid, ("message", {"role": "user", "text": "submit"}), ("run_started", {"run_id": "r1"}),
                    ("tool_started", {"call_id": "c-ok", "tool": "submit_order",
                                      "arguments": {"draft_id": "D-1002", "revision": 3}}),
                    ("approval_pending", {"call_id": "c-ok", "pending_id": "apr_ok", "fingerprint": "sha256:ab",
                                          "expires_at": expires, "preview": preview,
                                          "approval_url": "http://elsewhere/resume/apr_ok"}))
    ok = card(page, "c-ok")
    expect(ok.locator(".pill")).to_have_text("Awaiting approval")
    expect(ok.locator('[data-stage="approval_pending"]')).to_contain_text("1,234.50 EUR")
    expect(ok.locator('[data-stage="approval_pending"] a')).to_have_attribute("href", "/resume/apr_ok")
    expect(ok.locator(".countdown")).to_have_text(re.compile(r"^1[45]:\d\d$"))

    console.publish(sid, ("approval_resolved", {"call_id": "c-ok", "pending_id": "apr_ok", "status": "approved",
                                                "decided_by": "appr-1"}))
    expect(ok.locator(".pill")).to_have_text("Approved · not executed yet")
    expect(ok).to_have_attribute("data-state", "approved")
    expect(ok.locator(".countdown")).to_have_count(0)

    console.publish(sid, ("tool_executing", {"call_id": "c-ok"}),
                    ("tool_finished", {"call_id": "c-ok", "outcome": "succeeded", "result": {
                        "order_id": "O-1001", "status": "placed", "total_amount_minor": 123450, "currency": "EUR",
                        "paid_minor": 123450, "refunded_minor": 0, "lines": []}}),
                    # approved, but the ERP refused at commit
                    ("tool_started", {"call_id": "c-br", "tool": "submit_order", "arguments": {}}),
                    ("approval_pending", {"call_id": "c-br", "pending_id": "apr_br", "fingerprint": "sha256:cd",
                                          "expires_at": expires, "preview": preview, "approval_url": "x"}),
                    ("approval_resolved", {"call_id": "c-br", "pending_id": "apr_br", "status": "approved",
                                           "decided_by": "appr-1"}),
                    ("tool_executing", {"call_id": "c-br"}),
                    ("tool_finished", {"call_id": "c-br", "outcome": "business_rejected",
                                       "error": {"code": "stock_changed", "message": "on-hand moved"}}),
                    # rejected by a person: not executed
                    ("tool_started", {"call_id": "c-rej", "tool": "submit_order", "arguments": {}}),
                    ("approval_pending", {"call_id": "c-rej", "pending_id": "apr_rej", "fingerprint": "sha256:ef",
                                          "expires_at": expires, "preview": preview, "approval_url": "x"}),
                    ("approval_resolved", {"call_id": "c-rej", "pending_id": "apr_rej", "status": "rejected",
                                           "decided_by": "appr-2", "comment": "wrong customer"}),
                    ("tool_finished", {"call_id": "c-rej", "outcome": "not_executed",
                                       "error": {"code": "rejected", "message": "approval rejected: wrong customer"}}),
                    ("message", {"role": "assistant", "text": "Order O-1001 is placed."}),
                    ("run_finished", {"run_id": "r1"}))

    expect(ok.locator(".pill")).to_have_text("Done")
    expect(ok).to_have_attribute("data-state", "succeeded")
    expect(ok.locator('[data-stage="tool_finished"]')).to_contain_text(  # the server's one line (summaries.py)
        "Order O-1001 · placed · total 1,234.50 EUR · paid 1,234.50 EUR")
    assert [s.get_attribute("data-stage") for s in ok.locator(".stage").all()] == [
        "tool_started", "approval_pending", "approval_resolved", "tool_executing", "tool_finished"]
    rejected_by_erp = card(page, "c-br")
    expect(rejected_by_erp.locator(".pill")).to_have_text("Business rejected")
    expect(rejected_by_erp.locator('[data-stage="tool_finished"]')).to_contain_text("stock_changed")
    rejected = card(page, "c-rej")
    expect(rejected.locator(".pill")).to_have_text("Not executed")
    expect(rejected.locator('[data-stage="approval_resolved"]')).to_contain_text("Rejected by appr-2")
    expect(rejected.locator(".comment")).to_have_text("wrong customer")
    expect(page.locator(".message-agent .message-text")).to_have_text("Order O-1001 is placed.")
    expect(page.locator("#run-state")).to_be_hidden()
    page.screenshot(path=str(artifacts / "console-timeline.png"), full_page=True)


def test_reopening_a_session_replays_it_once_and_then_continues_live(console, new_page):
    sid = console.new_session("req-replay")
    console.publish(sid, ("message", {"role": "user", "text": "first"}),
                    ("message", {"role": "assistant", "text": "second"}))
    page = new_page(console.base_url, tok("req-replay", "requester"))
    page.goto(f"/#sessions/{sid}")
    expect(page.locator(".message")).to_have_count(2)

    page.goto("/#sessions")
    page.goto(f"/#sessions/{sid}")
    page.reload()
    console.publish(sid, ("message", {"role": "assistant", "text": "third"}))

    expect(page.locator(".message-text")).to_have_text(["first", "second", "third"])


def test_a_session_of_someone_else_is_not_shown(console, new_page):
    sid = console.new_session("req-owner")
    console.publish(sid, ("message", {"role": "user", "text": "private"}))
    page = new_page(console.base_url, tok("req-other", "requester"))

    page.goto(f"/#sessions/{sid}")

    expect(page.locator(".timeline .system")).to_contain_text("No such session of yours")
    expect(page.locator(".message")).to_have_count(0)


def test_hostile_text_in_messages_and_arguments_renders_as_text(console, new_page):
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    sid = console.new_session("req-xss")
    page = new_page(console.base_url, tok("req-xss", "requester"))
    page.goto(f"/#sessions/{sid}")
    expect(page.locator("#stream-state")).to_have_text("live")

    console.publish(sid, ("message", {"role": "user", "text": f"draft note: {hostile}"}),
                    ("tool_started", {"call_id": "c-x", "tool": "create_order_draft",
                                      "arguments": {"customer_id": "C-1001", "note": hostile,
                                                    "lines": [{"sku": "SKU-PAPER-A4", "qty": 1}]}}),
                    ("tool_finished", {"call_id": "c-x", "outcome": "business_rejected",
                                       "error": {"code": "unknown_customer", "message": hostile}}))

    expect(page.locator(".message-user .message-text")).to_have_text(f"draft note: {hostile}")
    expect(card(page, "c-x").locator('[data-stage="tool_finished"]')).to_contain_text(hostile)
    card(page, "c-x").locator("summary").first.click()
    expect(card(page, "c-x").locator("pre.json")).to_contain_text("<script>window.__pwned = 1</script>")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#timeline img, #timeline script").count() == 0


def test_the_inbox_lists_pending_approvals_newest_first_and_updates_without_reload(console, new_page, artifacts):
    console.fake.approvals.clear()
    page = new_page(console.base_url, tok("appr-inbox", "approver"))
    page.goto("/#approvals")
    expect(page.locator("#inbox-empty")).to_be_visible()
    page.evaluate("window.__sameDocument = true")

    older = console.fake.add_approval(submit_order_approval(requested_by="req-a", expires_in=600,
                                                            created_at=(now() - timedelta(minutes=1)).isoformat()))
    newer = console.fake.add_approval(submit_order_approval(requested_by="req-b", customer_name="Beta Ltd"))
    manager_only = console.fake.add_approval(submit_order_approval(required_roles=("manager",)))

    rows = page.locator("#inbox-rows tr")
    expect(rows).to_have_count(2)
    assert [r.get_attribute("data-pending-id") for r in rows.all()] == [newer["pending_id"], older["pending_id"]]
    first = rows.nth(0)
    expect(first).to_contain_text("Submit order")
    expect(first).to_contain_text("Draft D-1002 revision 3")
    expect(first).to_contain_text("Beta Ltd")
    expect(first).to_contain_text("1,234.50 EUR")
    expect(first).to_contain_text("req-b")
    expect(first.locator(".countdown")).to_have_text(re.compile(r"^1[45]:\d\d$"))
    expect(rows.nth(1).locator(".countdown")).to_have_text(re.compile(r"^(9|10):\d\d$"))
    expect(first.locator("a")).to_have_attribute("href", f"/resume/{newer['pending_id']}")
    expect(page.locator("#approvals-count")).to_have_text("2")
    page.screenshot(path=str(artifacts / "console-inbox.png"), full_page=True)

    older.update(status="approved", decided_by="someone")  # decided elsewhere
    expect(rows).to_have_count(1)
    newer.update(status="expired")
    expect(page.locator("#inbox-empty")).to_be_visible()
    assert page.evaluate("window.__sameDocument") is True
    assert manager_only["pending_id"] not in page.content()


def test_a_large_result_is_read_from_the_call_when_its_card_is_opened(console, new_page, artifacts):
    sid = console.new_session("req-big", "Long draft")
    lines = [{"item_number": n, "sku": "SKU-PAPER-A4", "qty": 2, "unit_price_minor": 450} for n in range(1, 301)]
    draft = {"draft_id": "D-1500", "revision": 101, "customer_id": "C-1001", "currency": "EUR",
             "total_amount_minor": 270000, "lines": lines}
    console.fake.tool_calls[(sid, "c-big")] = {"call_id": "c-big", "session_id": sid, "tool": "add_draft_line",
                                              "arguments": {}, "status": "finished", "outcome": "succeeded",
                                              "result": draft}
    line_417 = {**lines[0], "item_number": 417}
    marker_href = f"/v1/sessions/{sid}/tool-calls/c-marked"
    console.fake.tool_calls[(sid, "c-marked")] = {"call_id": "c-marked", "session_id": sid, "tool": "get_draft",
                                                 "arguments": {}, "status": "finished", "outcome": "succeeded",
                                                 "result": {**draft, "lines": [line_417]}}
    page = new_page(console.base_url, tok("req-big", "requester"))
    page.goto(f"/#sessions/{sid}")
    expect(page.locator("#stream-state")).to_have_text("live")

    console.publish(sid, ("tool_started", {"call_id": "c-big", "tool": "add_draft_line", "arguments": {}}),
                    ("tool_finished", {"call_id": "c-big", "outcome": "succeeded", "result": draft}),
                    ("tool_started", {"call_id": "c-small", "tool": "get_draft", "arguments": {}}),
                    ("tool_finished", {"call_id": "c-small", "outcome": "succeeded",
                                       "result": {**draft, "lines": lines[:1]}}),
                    ("tool_started", {"call_id": "c-marked", "tool": "get_draft", "arguments": {}}),
                    ("tool_finished", {"call_id": "c-marked", "outcome": "succeeded", "result": {
                        "omitted": True, "reason": "result_too_large", "size_bytes": 40960, "limit_bytes": 16384,
                        "href": marker_href}}))

    big = card(page, "c-big").locator('[data-stage="tool_finished"]')
    expect(big).to_contain_text("Draft D-1500 revision 101 · total 2,700.00 EUR")
    expect(big.locator("summary")).to_have_text(re.compile(r"^result \(\d+\.\d kB, loaded when opened\)$"))
    expect(big.locator("pre")).to_have_count(0)  # not kept in the page until asked for
    big.locator("summary").click()
    expect(big.locator("pre")).to_contain_text('"item_number": 300')

    small = card(page, "c-small").locator('[data-stage="tool_finished"]')
    expect(small.locator("summary")).to_have_text("result")
    expect(small.locator("pre")).to_have_count(1)

    marked = card(page, "c-marked").locator('[data-stage="tool_finished"]')
    expect(marked.locator("summary")).to_have_text("result (40.0 kB, loaded when opened)")
    expect(marked.locator("details")).to_have_attribute("data-href", marker_href)
    marked.locator("summary").click()
    expect(marked.locator("pre")).to_contain_text('"item_number": 417')
    page.screenshot(path=str(artifacts / "console-large-result.png"), full_page=True)
