"""Approval emails end to end (SPEC §11 "Approval channels", issue 34): a stack with ERPILOT_SMTP_URL and a policy
whose [people] table gives addresses mails each person who may decide a write, through a real SMTP server in the
test process (aiosmtpd). The link's page decides nothing; its confirmation, in Chromium, commits the write once;
the link then says it was used. A forged link is refused and records nothing."""

from __future__ import annotations

import re
import threading
import time
from email import message_from_bytes, policy
from email.message import EmailMessage

import httpx
import pytest
from playwright.sync_api import expect

from erpilot.stack.stack import free_port
from tests.e2e.conftest import Api, isolated_stack, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
SLOW = 30_000
PEOPLE = """
[people.mail-manager]
roles = ["manager"]
email = "manager@example.com"

[people.mail-requester]
roles = ["requester"]
email = "requester@example.com"
"""


class Mailbox:
    """An aiosmtpd handler keeping every message it accepted."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], EmailMessage]] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        with self.lock:
            self.messages.append((list(envelope.rcpt_tos),
                                  message_from_bytes(envelope.content, policy=policy.default)))
        return "250 OK"

    def about(self, pending_id: str) -> list[tuple[list[str], EmailMessage]]:
        with self.lock:
            return [(to, m) for to, m in self.messages if pending_id in m.get_body(("plain",)).get_content()]


@pytest.fixture(scope="module")
def mailbox():
    from aiosmtpd.controller import Controller

    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield box, controller.port
    controller.stop()


@pytest.fixture(scope="module")
def mail_stack(database_url, tmp_path_factory, mailbox):
    env = {"ERPILOT_SMTP_URL": f"smtp://127.0.0.1:{mailbox[1]}", "ERPILOT_SMTP_FROM": "erpilot@example.com"}
    with isolated_stack(database_url, tmp_path_factory.mktemp("mail-stack"), env, policy=PEOPLE) as running:
        yield running


def a_write_awaiting_approval(stack) -> tuple[Api, str, dict]:
    requester = Api(stack.base_url, "mail-requester", "requester")
    session_id = requester.new_session()
    reason = f"damaged in storage {time.monotonic_ns()}"
    body = requester.call(session_id, "adjust_stock", {"sku": "SKU-PAPER-A3", "delta": -1, "reason": reason},
                          reason="the shelf count says two are broken").json()
    assert body["status"] == "awaiting_approval", body
    return requester, session_id, body


def stock(stack) -> int:
    return Api(stack.base_url, "mail-requester", "requester").get("/v1/erp/products/SKU-PAPER-A3").json()["on_hand"]


def links_in(mailbox: Mailbox, pending_id: str) -> tuple[EmailMessage, str, str]:
    [(to, message)] = wait_for(lambda: mailbox.about(pending_id), timeout=30)
    assert to == ["manager@example.com"]  # the requester has an address too, but may not decide
    text = message.get_body(("plain",)).get_content()
    return message, re.search(r"^Approve: (\S+)", text, re.M)[1], re.search(r"^Reject: (\S+)", text, re.M)[1]


def test_following_the_mailed_approve_link_in_chromium_and_confirming_commits_the_write_once(
        mail_stack, mailbox, browser_page):
    before = stock(mail_stack)
    requester, session_id, write = a_write_awaiting_approval(mail_stack)
    pending_id = write["pending_id"]
    message, approve, reject = links_in(mailbox[0], pending_id)
    text = message.get_body(("plain",)).get_content()
    assert "The ledger's preview:" in text and "SKU-PAPER-A3" in text
    assert "The agent says" in text and "the shelf count says two are broken" in text
    assert approve.startswith(f"{mail_stack.base_url}/v1/approvals/{pending_id}/email-decision?token=")

    page = browser_page(mail_stack.base_url)
    page.goto(approve)
    expect(page.locator("#link-person")).to_have_text("mail-manager")
    expect(page.locator("#agent-reason")).to_have_text("the shelf count says two are broken")
    manager = Api(mail_stack.base_url, "mail-manager", "manager")
    assert manager.get(f"/v1/approvals/{pending_id}").json()["status"] == "pending"  # opening decided nothing

    page.click("#confirm")
    expect(page.locator("#email-done h1")).to_have_text("Recorded: approved", timeout=SLOW)
    view = wait_for(lambda: (v := requester.get(f"/v1/sessions/{session_id}/tool-calls/{write['call_id']}").json())
                    ["status"] == "finished" and v, timeout=30)
    assert view["outcome"] == "succeeded" and stock(mail_stack) == before - 1
    assert manager.get(f"/v1/approvals/{pending_id}").json()["decided_by"] == "mail-manager"

    for used in (approve, reject):
        response = page.goto(used)
        assert response.status == 409
        expect(page.locator("#email-refused h1")).to_have_text("This link was already used")
    assert stock(mail_stack) == before - 1  # once


def test_a_forged_link_is_refused_and_records_nothing(mail_stack, mailbox):
    _, _, write = a_write_awaiting_approval(mail_stack)
    pending_id = write["pending_id"]
    _, approve, reject = links_in(mailbox[0], pending_id)
    token = reject.split("token=", 1)[1]
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    path = f"/v1/approvals/{pending_id}/email-decision"
    with httpx.Client(base_url=mail_stack.base_url, timeout=30) as client:
        shown = client.get(path, params={"token": forged})
        assert shown.status_code == 403 and "This link is not valid" in shown.text
        posted = client.post(path, data={"token": forged})
        assert posted.status_code == 403 and "invalid_link" in posted.text
        manager = Api(mail_stack.base_url, "mail-manager", "manager")
        assert manager.get(f"/v1/approvals/{pending_id}").json()["status"] == "pending"

        assert client.post(path, data={"token": token}).status_code == 200  # the real reject link
        assert manager.get(f"/v1/approvals/{pending_id}").json()["status"] == "rejected"
        again = client.post(path, data={"token": token})
        assert again.status_code == 409 and "already used" in again.text
