"""Approval emails ride the webhook deliveries (memory unit of work): one row per approval and person however
often the event comes, retried when the mail server fails, a dead letter after ERPILOT_SMTP_MAX_ATTEMPTS, skipped
when the approval ended first; and the [people] table's email and chat_id."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from erpilot_approval.domain.people import Contact, parse_contacts
from erpilot_approval.domain.policy import load_policy
from erpilot_approval.domain.policy_values import PolicyError
from erpilot_approval.service_layer.webhook_dispatch import WebhookDispatcher
from erpilot_approval.service_layer.webhook_events import WebhookEvents

from .conftest import Desk

pytestmark = pytest.mark.unit


class FlakyMailer:
    """Fails the first ``failures`` sends, then accepts; records what it was asked to send."""

    def __init__(self, failures: int, max_attempts: int = 3):
        self.failures, self.max_attempts = failures, max_attempts
        self.sent: list[tuple[str, str]] = []

    async def send(self, approval, row) -> str | None:
        self.sent.append((approval.pending_id, row.url))
        if len(self.sent) <= self.failures:
            return "SMTPServerDisconnected: connection lost"
        return None


class DeadLetters:
    def __init__(self) -> None:
        self.published: list[tuple[bytes, str]] = []

    async def publish(self, body: bytes, *, source: str, headers: dict[str, Any]) -> None:
        self.published.append((body, source))


async def deliver(desk: Desk, dispatcher: WebhookDispatcher, rounds: int) -> None:
    for _ in range(rounds):
        await dispatcher.dispatch_once(None)
        desk.uow.advance(timedelta(seconds=30))  # past the backoff of the first few attempts (1 s, 2 s, 4 s)


async def mailed(desk: Desk) -> str:
    record = await desk.request("submit_order")
    events = WebhookEvents(desk.uow, (), "https://erpilot.example",
                           mail_recipients=lambda approval: [("bob", "bob@example.com")])
    await events.on_requested(record["pending_id"])
    await events.on_requested(record["pending_id"])  # the event again (a redelivery): no second mail
    return record["pending_id"]


async def test_one_mail_per_person_and_approval_retried_until_the_server_takes_it():
    desk = Desk(load_policy(None))
    pending_id = await mailed(desk)
    mailer = FlakyMailer(failures=2)
    dispatcher = WebhookDispatcher(desk.uow, (), mailer=mailer, dead_letters=DeadLetters())

    await deliver(desk, dispatcher, 5)
    assert mailer.sent == [(pending_id, "mailto:bob@example.com")] * 3
    [row] = desk.state.webhooks
    assert (row.status, row.attempts) == ("delivered", 3)


async def test_a_mail_the_server_keeps_refusing_is_a_dead_letter_after_the_last_attempt():
    desk = Desk(load_policy(None))
    await mailed(desk)
    mailer, dead = FlakyMailer(failures=100, max_attempts=3), DeadLetters()
    dispatcher = WebhookDispatcher(desk.uow, (), mailer=mailer, dead_letters=dead)

    await deliver(desk, dispatcher, 5)
    assert len(mailer.sent) == 3
    [row] = desk.state.webhooks
    assert (row.status, row.attempts) == ("dead", 3)
    [(body, source)] = dead.published
    assert source == "webhook.approval.email" and b"token" not in body  # the dead letter holds no link


async def test_a_mail_whose_approval_was_decided_first_is_skipped():
    desk = Desk(load_policy(None))
    pending_id = await mailed(desk)
    record = desk.approval(pending_id)
    await desk.decide({"pending_id": pending_id, "fingerprint": record.fingerprint}, "reject", "carol", "approver")
    mailer = FlakyMailer(failures=0)

    await deliver(desk, WebhookDispatcher(desk.uow, (), mailer=mailer), 1)
    assert mailer.sent == [] and desk.state.webhooks[0].status == "skipped"


def test_the_people_table_gives_email_and_chat_id_and_refuses_a_malformed_address():
    contacts = parse_contacts({"bob": {"roles": ["manager"], "email": "bob@example.com", "chat_id": "U024"},
                               "carol": {"roles": ["approver"]}})
    assert contacts == {"bob": Contact(email="bob@example.com", chat_id="U024")}
    for bad in ("bob", "bob@example.com\r\nBcc: eve@example.com", "Bob <bob@example.com>", 7):
        with pytest.raises(PolicyError, match=r"people\.bob\.email"):
            parse_contacts({"bob": {"roles": [], "email": bad}})
    policy = load_policy('[people.bob]\nroles = ["manager"]\nemail = "bob@example.com"\n')
    assert policy.people == {"bob": ("manager",)} and policy.contacts["bob"].email == "bob@example.com"
