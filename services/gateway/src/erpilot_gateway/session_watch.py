"""The NATS side of a session's events, for the gateway's ``Services``: a live watch and a replay from the start.

``watch_session`` (core NATS) serves a request being answered: the 202 of a write tool call waits there for its
``approval_pending`` (ARCHITECTURE, "The life of a write"). The subscription is taken before the command is sent,
so no event the command causes can be missed; events are queued as they arrive and looked at only by the request
that watches. Nothing here is durable: a gap (a reconnect) only means the wait runs into its bound and the caller
asks for the call's state instead.

``replay_session`` (JetStream) serves the SSE stream: every stored event of the session from its first on, then
each new one, through an ordered consumer (``sse`` puts them in ``seq`` order and resumes after Last-Event-ID).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from faststream.nats import NatsBroker
from nats.js.api import ConsumerConfig, DeliverPolicy

from erpilot_contracts.subjects import session_events_subject

log = logging.getLogger(__name__)
# The replay reads through an ordered consumer (ephemeral, one replica). When the NATS node holding it dies,
# nats-py notices two missed heartbeats and recreates it from the last delivered stream sequence (again
# after two more if the stream has no leader yet): a short heartbeat keeps that gap to a couple of seconds.
HEARTBEAT_SECONDS = 1.0


class SessionWatch:
    """The events of one session published since the watch began, in arrival order."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def received(self, message: Any) -> None:
        try:
            event = json.loads(message.data)
        except ValueError:
            log.warning("a session event that is not JSON on %s", message.subject)
            return
        if isinstance(event, dict) and isinstance(event.get("data"), dict):
            await self.queue.put(event)

    async def first(self, wanted: Callable[[dict[str, Any]], bool], *, timeout: float) -> dict[str, Any] | None:
        """The first event ``wanted`` accepts, waiting at most ``timeout`` seconds; None when none came."""
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                while not wanted(event := await self.queue.get()):
                    pass
                return event
        except TimeoutError:
            return None


@asynccontextmanager
async def watch_session(broker: NatsBroker, session_id: str) -> AsyncIterator[SessionWatch]:
    """Subscribe to ``session_id``'s events for the body of the ``async with``."""
    watch = SessionWatch()
    subscription = await broker.connection.subscribe(session_events_subject(session_id), cb=watch.received)
    try:
        yield watch
    finally:
        try:
            await subscription.unsubscribe()
        except Exception:  # a closed connection has no subscription left to end
            log.debug("could not unsubscribe from session %s", session_id, exc_info=True)


class SessionReplay:
    """A session's stored events, then its new ones, in the order JetStream delivers them."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def received(self, message: Any) -> None:
        await self.queue.put(message.data)

    async def next(self, *, timeout: float) -> dict[str, Any] | None:
        """The next event, waiting at most ``timeout`` seconds; None when none came."""
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                raw = await self.queue.get()
        except TimeoutError:
            return None
        return json.loads(raw)


@asynccontextmanager
async def replay_session(broker: NatsBroker, session_id: str) -> AsyncIterator[SessionReplay]:
    """Read ``session_id``'s events from its first for the body of the ``async with``."""
    replay = SessionReplay()
    subscription = await broker.config.connection_state.stream.subscribe(
        session_events_subject(session_id), cb=replay.received, ordered_consumer=True,
        idle_heartbeat=HEARTBEAT_SECONDS, config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL))
    try:
        yield replay
    finally:
        await subscription.unsubscribe()
