"""The SSE replay of a session (``session_watch.SessionReplay``) without NATS: the stored events after the
reader's seq first, page by page, then the live ones, each seq once and in order; what core NATS dropped is read
back from the store, whether a later event shows the gap or a quiet stream has to look."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from erpilot_gateway import session_watch
from erpilot_gateway.session_watch import SessionReplay

pytestmark = pytest.mark.unit


def event(seq: int) -> dict:
    return {"seq": seq, "type": "message", "session_id": "ses_1", "occurred_at": "2026-10-01T12:00:00Z",
            "data": {"text": f"event {seq}"}}


class Store:
    """The agent's store of one session, as ``query.agent.events`` answers; counts the reads."""

    def __init__(self, last_seq: int = 0):
        self.events = [event(seq) for seq in range(1, last_seq + 1)]
        self.reads: list[tuple[int, int]] = []
        self.page_events = 10_000  # how many events fit one reply's bytes

    def commit(self, seq: int) -> dict:
        self.events.append(stored := event(seq))
        return stored

    async def fetch(self, after_seq: int, limit: int) -> tuple[list[dict], bool]:
        """As the agent answers: a page of ``limit`` at most, fewer when they are large (``page_bytes``)."""
        self.reads.append((after_seq, limit))
        after = [e for e in self.events if e["seq"] > after_seq]
        page = after[:min(limit, self.page_events)]
        return page, len(after) > len(page)


async def live(replay: SessionReplay, stored: dict) -> None:
    """As core NATS delivers: the message with the event as JSON."""
    await replay.received(SimpleNamespace(data=json.dumps(stored).encode(), subject="erpilot.v1.sessions.ses_1.events"))


async def drain(replay: SessionReplay) -> list[int]:
    seqs = []
    while (got := await replay.next(timeout=0.01)) is not None:
        seqs.append(got["seq"])
    return seqs


async def test_the_stored_events_after_the_readers_seq_come_first_a_page_at_a_time_then_the_live_ones():
    store = Store(last_seq=450)
    replay = SessionReplay(store.fetch, after_seq=5)
    await live(replay, store.events[449])  # published while the replay read the store: a duplicate, passed over
    await live(replay, store.commit(451))

    assert await drain(replay) == list(range(6, 452))
    assert store.reads == [(5, 200), (205, 200), (405, 200)]  # the last had no more after it: caught up


async def test_pages_cut_short_by_their_bytes_are_read_on_until_the_store_has_no_more():
    store = Store(last_seq=7)
    store.page_events = 3  # large events: three fit a reply
    replay = SessionReplay(store.fetch, after_seq=0)

    assert await drain(replay) == list(range(1, 8))
    assert [after for after, _ in store.reads] == [0, 3, 6]


async def test_a_live_event_that_skips_ahead_has_the_gap_read_from_the_store():
    store = Store(last_seq=2)
    replay = SessionReplay(store.fetch, after_seq=0)
    assert await drain(replay) == [1, 2]
    store.commit(3)  # stored; its live publish was dropped
    await live(replay, store.commit(4))
    await live(replay, store.commit(5))

    assert await drain(replay) == [3, 4, 5]
    assert store.reads[1:] == [(2, session_watch.REPLAY_PAGE)]  # one look, at the gap


async def test_a_quiet_stream_looks_at_the_store_for_a_dropped_last_event(monkeypatch):
    store = Store(last_seq=1)
    replay = SessionReplay(store.fetch, after_seq=0)
    assert await drain(replay) == [1]
    store.commit(2)  # its live publish was dropped, and no later event shows the gap
    assert await replay.next(timeout=0.01) is None  # not yet: a look per quiet interval, not per wait

    monkeypatch.setattr(session_watch, "IDLE_LOOK_SECONDS", 0.0)
    assert await drain(replay) == [2]


async def test_what_is_not_an_event_is_ignored():
    store = Store()
    replay = SessionReplay(store.fetch, after_seq=0)
    await replay.received(SimpleNamespace(data=b"not json", subject="erpilot.v1.sessions.ses_1.events"))
    await replay.received(SimpleNamespace(data=b'{"seq": "1"}', subject="erpilot.v1.sessions.ses_1.events"))
    await live(replay, store.commit(1))

    assert await drain(replay) == [1]


async def test_a_store_page_that_does_not_go_on_from_the_readers_seq_ends_the_look_instead_of_a_loop():
    """Security review of #31: a compromised agent answers every read with ``more`` and a page after a gap; the
    stream asked for the same seq again without end (254k reads a second) and never reached its token's expiry."""
    reads = []

    async def lying(after_seq: int, limit: int) -> tuple[list[dict], bool]:
        reads.append(after_seq)
        return [event(after_seq + 2)], True

    replay = SessionReplay(lying, after_seq=0)
    assert await replay.next(timeout=0.01) is None
    assert reads == [0]  # one read, not one per turn of a loop


async def test_a_look_reads_a_bounded_number_of_pages_and_the_rest_once_those_are_handed_out(monkeypatch):
    monkeypatch.setattr(session_watch, "REPLAY_PAGES_PER_LOOK", 2)
    store = Store(last_seq=7)
    store.page_events = 2
    replay = SessionReplay(store.fetch, after_seq=0)

    assert await replay.next(timeout=0.01) == store.events[0]
    assert [after for after, _ in store.reads] == [0, 2]  # two pages in the first look
    assert await drain(replay) == [2, 3, 4, 5, 6, 7]  # the rest, no event missed


async def test_a_live_event_the_contract_refuses_or_of_another_session_is_dropped():
    """Security review: the agent publishes live events; the gateway passes on only a SessionEventV1 of the stream's
    session, as the store's events (no field or type of the agent's choosing reaches the SSE stream)."""
    for bad in ({"type": "no\nsuch: type\n\nid: 99999"}, {"session_id": "ses_other"}, {"data": "not an object"}):
        replay = SessionReplay(Store().fetch, after_seq=0, session_id="ses_1")
        await live(replay, {**event(1), **bad})
        assert await drain(replay) == [], bad

    replay = SessionReplay(Store().fetch, after_seq=0, session_id="ses_1")
    await live(replay, {**event(1), "injected": "<img src=x>"})
    got = await replay.next(timeout=0.01)
    assert got == {"schema_version": 1, **event(1)}  # the contract's fields, as the store's events
