"""The NATS side of a session's events, for the gateway's ``Services``: a live watch and a replay from the start.

``watch_session`` (core NATS) serves a request being answered: the 202 of a write tool call waits there for its
``approval_pending`` (ARCHITECTURE, "The life of a write"). The subscription is taken before the command is sent,
so no event the command causes can be missed; events are queued as they arrive and looked at only by the request
that watches. Nothing here is durable: a gap (a reconnect) only means the wait runs into its bound and the caller
asks for the call's state instead.

``replay_session`` serves the SSE stream: the events after the reader's seq from the agent's store (each is stored
once, there, with its seq: SPEC §11), then each new one as it is published live on core NATS, in ``seq`` order
and gap-free (``SessionReplay``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from faststream.nats import NatsBroker
from pydantic import ValidationError

from erpilot_contracts.sessions.v1 import SessionEventV1
from erpilot_contracts.subjects import session_events_subject

log = logging.getLogger(__name__)
# The stored events after a seq, at most so many, and whether more are stored after them (``query.agent.events``,
# whose pages are also bounded in bytes): ``Services.replay_session`` asks.
StoreFetch = Callable[[int, int], Awaitable[tuple[list[dict[str, Any]], bool]]]
REPLAY_PAGE = 200
# At most so many pages per look at the store (REPLAY_PAGE events each): a store that answers ``more`` forever
# must not keep one stream reading; what is left is read at the next look, once the reader has these.
REPLAY_PAGES_PER_LOOK = 25
# A quiet stream looks at the store this often: core NATS may have dropped the last event, and no later one
# (whose seq would skip ahead) shows the gap. One query per open stream and interval.
IDLE_LOOK_SECONDS = 10.0


def session_event(message: Any, session_id: str | None = None) -> dict[str, Any] | None:
    """A live message as a ``SessionEventV1`` (as the store's events are read: JSON, known fields only), or None
    when it is none, or is about another session. The agent publishes these; the gateway passes on only what the
    contract allows (a type is one of the known names, so nothing of the agent's choosing reaches an SSE field)."""
    try:
        event = SessionEventV1.model_validate_json(message.data)
    except ValidationError:
        log.warning("a session event that does not match SessionEventV1 on %s; dropped", message.subject)
        return None
    if session_id is not None and event.session_id != session_id:
        log.warning("an event of session %s on %s; dropped", event.session_id, message.subject)
        return None
    return event.model_dump(mode="json")


class SessionWatch:
    """The events of one session published since the watch began, in arrival order."""

    def __init__(self, session_id: str | None = None) -> None:
        self.session_id = session_id
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def received(self, message: Any) -> None:
        if (event := session_event(message, self.session_id)) is not None:
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
    watch = SessionWatch(session_id)
    subscription = await broker.connection.subscribe(session_events_subject(session_id), cb=watch.received)
    try:
        yield watch
    finally:
        try:
            await subscription.unsubscribe()
        except Exception:  # a closed connection has no subscription left to end
            log.debug("could not unsubscribe from session %s", session_id, exc_info=True)


class SessionReplay:
    """A session's events after ``after_seq`` in ``seq`` order, each once, with no gap: the stored ones first (the
    agent's store, read through ``fetch``), then the live ones (core NATS). The live subscription is taken before
    the first read of the store, so an event is in the store or in the live queue, or both (a duplicate, passed
    over). Core NATS may drop an event: a live event whose seq skips ahead, or a quiet of ``IDLE_LOOK_SECONDS``
    (the dropped event may be the last for a while), sends the reader to the store for what it has not seen.

    The store is the agent's, the least trusted service's: a page that does not go on from ``last_seq`` ends the
    look (never the same ``after_seq`` asked for again in a loop), and a look reads at most
    ``REPLAY_PAGES_PER_LOOK`` pages."""

    def __init__(self, fetch: StoreFetch, after_seq: int, session_id: str | None = None):
        self.fetch = fetch
        self.session_id = session_id
        self.last_seq = after_seq  # the seq of the last event handed out (or the reader had)
        self.live: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.ready: deque[dict[str, Any]] = deque()
        self.looked_at: float | None = None  # when the store was last read (monotonic); None: not yet
        self.behind = False  # the last look stopped at its page cap with more stored

    async def received(self, message: Any) -> None:
        if (event := session_event(message, self.session_id)) is not None:
            await self.live.put(event)

    async def next(self, *, timeout: float) -> dict[str, Any] | None:
        """The next event, waiting at most ``timeout`` seconds for a live one; None when none came."""
        if self.looked_at is None or (self.behind and not self.ready):
            await self._read_store()  # the replay: everything stored after the reader's seq (or the rest of it)
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self.ready:
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                    event = await self.live.get()
            except TimeoutError:
                if time.monotonic() - self.looked_at >= IDLE_LOOK_SECONDS:
                    await self._read_store()
                break
            if event["seq"] == self.last_seq + 1:
                self._hand_out(event)
            elif event["seq"] > self.last_seq + 1:
                await self._read_store()  # core NATS dropped what came before: the store has it
        return self.ready.popleft() if self.ready else None

    def _hand_out(self, event: dict[str, Any]) -> None:
        self.ready.append(event)
        self.last_seq = event["seq"]

    async def _read_store(self) -> None:
        """Queue the stored events after ``last_seq``, page by page, until the store has no more, a page does not
        go on from ``last_seq`` or ``REPLAY_PAGES_PER_LOOK`` pages were read (then ``behind``: the next call of
        ``next`` that finds nothing ready reads on)."""
        self.looked_at = time.monotonic()
        self.behind = False
        for _ in range(REPLAY_PAGES_PER_LOOK):
            before = self.last_seq
            page, more = await self.fetch(self.last_seq, REPLAY_PAGE)
            for event in page:
                if event["seq"] == self.last_seq + 1:
                    self._hand_out(event)
            if not more:
                return
            if self.last_seq == before:  # a page that skips ahead, or repeats: asking again would get it again
                log.warning("the store's page after seq %s does not go on from it; the look ends", before)
                return
        self.behind = True


@asynccontextmanager
async def replay_session(broker: NatsBroker, session_id: str, fetch: StoreFetch, after_seq: int
                         ) -> AsyncIterator[SessionReplay]:
    """Read ``session_id``'s events after ``after_seq`` (stored, then live) for the body of the ``async with``."""
    replay = SessionReplay(fetch, after_seq, session_id)
    subscription = await broker.connection.subscribe(session_events_subject(session_id), cb=replay.received)
    try:
        yield replay
    finally:
        try:
            await subscription.unsubscribe()
        except Exception:  # a closed connection has no subscription left to end
            log.debug("could not unsubscribe from session %s", session_id, exc_info=True)
