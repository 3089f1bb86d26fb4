"""Bridge of a session's JetStream subject to Server-Sent Events.

Each event's ``id`` is its ``seq`` and ``event`` its type (SPEC §4). JetStream may hold a duplicate
(re-published outbox row) or, in theory, an out-of-order pair; the bridge emits each seq exactly
once and in order, buffering a seq that arrives before its predecessor.

A stream ends when the token that opened it expires (within a second of its ``exp``): a revoked or
stolen token must not keep a session's events flowing. The client reconnects with a fresh token and
``Last-Event-ID``, and misses nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from fastapi import Request
from sse_starlette.sse import EventSourceResponse

from erpilot_gateway.services import Services

KEEPALIVE_SECONDS = 15


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


async def _events(request: Request, services: Services, session_id: str, after_seq: int, until: float | None
                  ) -> AsyncIterator[dict]:
    order = SeqOrder(after_seq)
    async with services.replay_session(session_id) as replay:
        while True:
            if await request.is_disconnected():
                return
            wait = 1.0 if until is None else min(1.0, until - time.time())
            if wait <= 0:
                return  # the token expired
            event = await replay.next(timeout=wait)
            if event is None:
                continue
            for ready in order.push(event):
                yield {"id": str(ready["seq"]), "event": ready["type"], "data": json.dumps(ready)}


def session_event_stream(request: Request, session_id: str, after_seq: int, *, until: float | None
                         ) -> EventSourceResponse:
    """The session's events after ``after_seq``, until the Unix time ``until`` (the token's ``exp``)."""
    return EventSourceResponse(_events(request, request.app.state.services, session_id, after_seq, until),
                               ping=KEEPALIVE_SECONDS)
