"""A dead webhook's copy on the dead-letter stream carries a ``Nats-Msg-Id`` nobody can foresee (issue #32): the
stream takes every service's dead letters and de-duplicates by that id, so ``wh-<serial>`` let another publisher
store a message under the next serial first and have the real copy dropped."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest

from erpilot_approval.domain.webhooks import Webhook
from erpilot_approval.service_layer.webhook_dispatch import WebhookDispatcher
from erpilot_approval.service_layer.webhook_events import WebhookEvents
from erpilot_platform.outbox import name_of

from .test_read_side_and_jobs import DeadLetterStream, unreachable

pytestmark = pytest.mark.unit

HOOK = Webhook(url="https://hooks.example/erpilot", events=("approval.requested",), secret="0123456789abcdef")


async def test_a_dead_letter_copy_is_named_after_its_delivery_with_a_random_part(desk):
    for _ in range(2):
        record = await desk.request("submit_order")
        await WebhookEvents(desk.uow, (HOOK,), "https://erpilot.example").on_requested(record["pending_id"])
    stream = DeadLetterStream()
    dispatcher = WebhookDispatcher(desk.uow, (HOOK,), dead_letters=stream, give_up_after=timedelta(0))

    async with httpx.AsyncClient(transport=httpx.MockTransport(unreachable)) as client:
        assert await dispatcher.dispatch_once(client) == 2

    ids = {row.delivery_id: headers["Nats-Msg-Id"]
           for row in desk.state.webhooks for body, _, headers in stream.copies if body == row.body.encode()}
    assert len(ids) == 2
    for delivery_id, msg_id in ids.items():
        assert name_of(msg_id) == f"wh-{delivery_id}"  # still says which delivery it was
        assert re.fullmatch(rf"wh-{delivery_id}\.[0-9a-f]{{32}}", msg_id), msg_id  # and cannot be foreseen
