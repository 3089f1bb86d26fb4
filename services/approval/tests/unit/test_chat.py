"""The chat card (SPEC §11 "Approval channels") on the memory unit of work: a button press signed with Slack's
``v0`` scheme decides as the person whose ``chat_id`` pressed it, and queues the card's update; a forged, stale,
replayed or unmapped press decides nothing. And what the card shows."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest

from erpilot_approval.domain.chat import card
from erpilot_approval.domain.policy import load_policy
from erpilot_approval.service_layer.chat import chat_action
from erpilot_contracts.approval.chat import ChatActionV1
from erpilot_platform.testing.previews import preview_json

from ..fakes import NOW
from .conftest import Desk, refusal_of

pytestmark = pytest.mark.unit
SECRET = b"8f742231b10e8888abcd99yyyzzz85a5"
POLICY = """
[people.bob]
roles = ["approver"]
chat_id = "U-BOB"
[people.carol]
roles = ["approver"]
"""


@pytest.fixture
def desk() -> Desk:
    policy = load_policy(POLICY)
    desk = Desk(policy)
    desk.ports = dataclasses.replace(desk.ports, people=lambda: policy.people, chat_secret=SECRET)
    return desk


def press(record: dict, user: str = "U-BOB", action: str = "approve", *, at=NOW, secret: bytes = SECRET,
          response_url: str | None = "https://hooks.example/actions/1") -> ChatActionV1:
    payload = {"type": "block_actions", "user": {"id": user}, "response_url": response_url,
               "actions": [{"action_id": action, "value": f"{record['pending_id']}|{record['fingerprint']}"}]}
    body = urlencode({"payload": json.dumps(payload)})
    timestamp = str(int(at.timestamp()))
    signature = "v0=" + hmac.new(secret, f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return ChatActionV1(body=body, timestamp=timestamp, signature=signature)


async def test_a_signed_press_decides_as_the_mapped_person_and_queues_the_cards_update(desk):
    record = await desk.request("submit_order")

    decided = await chat_action(press(record), desk.ports)
    assert (decided.status, decided.decided_by) == ("approved", "bob")
    [update] = [row for row in desk.state.webhooks if row.event_type == "chat.update"]
    assert update.url == "https://hooks.example/actions/1"
    assert json.loads(update.body)["replace_original"] is True and "approved" in json.loads(update.body)["text"]


async def test_a_replayed_press_is_refused_inside_the_window_and_outside_it(desk):
    record = await desk.request("submit_order")
    pressed = press(record)
    await chat_action(pressed, desk.ports)

    again = await refusal_of(chat_action(pressed, desk.ports))
    assert (again.code, again.status) == ("already_voted", 409)
    desk.uow.advance(timedelta(minutes=5, seconds=1))
    late = await refusal_of(chat_action(pressed, desk.ports))
    assert (late.code, late.status) == ("stale_request", 401)
    assert [(d.actor, d.action) for d in desk.state.decisions] == [("bob", "approve")]


@pytest.mark.parametrize("case", ["forged", "stale", "unknown_user", "unmapped_person", "no_secret"])
async def test_a_press_that_proves_nothing_decides_nothing(desk, case):
    record = await desk.request("submit_order")
    pressed, secret = {
        "forged": (press(record, secret=b"not-the-secret"), SECRET),
        "stale": (press(record, at=NOW - timedelta(minutes=6)), SECRET),
        "unknown_user": (press(record, user="U-NOBODY"), SECRET),
        "unmapped_person": (press(record, user="carol"), SECRET),  # carol has no chat_id: a sub is no chat user
        "no_secret": (press(record), None),
    }[case]

    refusal = await refusal_of(chat_action(pressed, dataclasses.replace(desk.ports, chat_secret=secret)))
    assert refusal.status in (401, 403, 404) and refusal.code in (
        "invalid_signature", "stale_request", "unknown_chat_user", "chat_not_configured")
    assert desk.state.decisions == [] and desk.approval(record["pending_id"]).votes == ()


def test_the_card_shows_preview_amount_deadline_the_agents_reason_apart_and_three_buttons(make_pending):
    preview = preview_json(operation="submit_order", target="Nordwind", amount_minor=12345, currency="EUR")
    approval = dataclasses.replace(make_pending("submit_order", preview=preview), agent_reason="customer <asked>")
    message = card(approval, "https://erpilot.example/resume/pa-1")
    text = json.dumps(message)
    assert "123.45 EUR" in text and approval.expires_at.strftime("%Y-%m-%d %H:%M UTC") in text
    [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == ["approve", "reject", "open"]
    assert actions["elements"][0]["value"] == f"pa-1|{approval.fingerprint}"
    assert actions["elements"][2]["url"] == "https://erpilot.example/resume/pa-1"
    [reason] = [b for b in message["blocks"] if b["type"] == "context"]
    said = reason["elements"][0]["text"]
    assert "The agent says" in said and "customer &lt;asked&gt;" in said
