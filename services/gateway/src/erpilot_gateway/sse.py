"""Bridge of a session's JetStream subject to Server-Sent Events.

Each event's ``id`` is its ``seq`` and ``event`` its type (SPEC §4). JetStream may hold a duplicate
(re-published outbox row) or, in theory, an out-of-order pair; the bridge emits each seq exactly
once and in order, buffering a seq that arrives before its predecessor.

A stream ends when the token that opened it expires (within a second of its ``exp``): a revoked or
stolen token must not keep a session's events flowing. The client reconnects with a fresh token and
``Last-Event-ID``, and misses nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from fastapi import Request
from nats.js.api import ConsumerConfig, DeliverPolicy
from sse_starlette.sse import EventSourceResponse

from erpilot_contracts.subjects import session_events_subject
from erpilot_platform.waiting import within

KEEPALIVE_SECONDS = 15
# The bridge reads through an ordered consumer (ephemeral, one replica). When the NATS node holding it dies,
# nats-py notices two missed heartbeats and recreates it from the last delivered stream sequence (again
# after two more if the stream has no leader yet): a short heartbeat keeps that gap to a couple of seconds.
HEARTBEAT_SECONDS = 1.0


class SeqOrder:
    """Releases events in ``seq`` order starting after ``after_seq``; drops duplicates."""

    def __init__(self, after_seq: int):
        self.next_seq = after_seq + 1
        self.waiting: dict[int, dict] = {}

    def push(self, event: dict) -> list[dict]:
        seq = event["seq"]
        if seq < self.next_seq or seq in self.waiting:
            return []
        self.waiting[seq] = event
        ready = []
        while self.next_seq in self.waiting:
            ready.append(self.waiting.pop(self.next_seq))
            self.next_seq += 1
        return ready


async def _events(request: Request, session_id: str, after_seq: int, until: float | None) -> AsyncIterator[dict]:
    js = request.app.state.broker.config.connection_state.stream
    queue: asyncio.Queue = asyncio.Queue()

    async def on_message(msg) -> None:
        await queue.put(msg.data)

    subscription = await js.subscribe(
        session_events_subject(session_id), cb=on_message, ordered_consumer=True, idle_heartbeat=HEARTBEAT_SECONDS,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
    )
    order = SeqOrder(after_seq)
    try:
        while True:
            if await request.is_disconnected():
                return
            wait = 1.0 if until is None else min(1.0, until - time.time())
            if wait <= 0:
                return  # the token expired
            try:
                raw = await within(queue.get(), wait)
            except TimeoutError:
                continue
            event = json.loads(raw)
            for ready in order.push(event):
                yield {"id": str(ready["seq"]), "event": ready["type"], "data": json.dumps(ready)}
    finally:
        await subscription.unsubscribe()


def session_event_stream(request: Request, session_id: str, after_seq: int, *, until: float | None
                         ) -> EventSourceResponse:
    """The session's events after ``after_seq``, until the Unix time ``until`` (the token's ``exp``)."""
    return EventSourceResponse(_events(request, session_id, after_seq, until), ping=KEEPALIVE_SECONDS)
