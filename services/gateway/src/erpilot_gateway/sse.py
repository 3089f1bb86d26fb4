"""Bridge of a session's events to Server-Sent Events.

Each event's ``id`` is its ``seq`` and ``event`` its type (SPEC §4). The replay (``session_watch.SessionReplay``)
hands out each seq exactly once and in order: the agent's stored events after ``Last-Event-ID``, then the live
ones, with whatever core NATS dropped read back from the store.

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
from erpilot_gateway.summaries import with_summary

KEEPALIVE_SECONDS = 15


async def _events(request: Request, services: Services, session_id: str, owner: str, after_seq: int,
                  until: float | None) -> AsyncIterator[dict]:
    tools: dict[str, str] = {}  # call id -> tool, for the summaries (summaries.with_summary)
    async with services.replay_session(session_id, owner, after_seq) as replay:
        while True:
            if await request.is_disconnected():
                return
            wait = 1.0 if until is None else min(1.0, until - time.time())
            if wait <= 0:
                return  # the token expired
            event = await replay.next(timeout=wait)
            if event is not None:
                yield {"id": str(event["seq"]), "event": event["type"],
                       "data": json.dumps(with_summary(event, tools))}


def session_event_stream(request: Request, session_id: str, owner: str, after_seq: int, *, until: float | None
                         ) -> EventSourceResponse:
    """``owner``'s session's events after ``after_seq``, until the Unix time ``until`` (the token's ``exp``)."""
    return EventSourceResponse(_events(request, request.app.state.services, session_id, owner, after_seq, until),
                               ping=KEEPALIVE_SECONDS)
