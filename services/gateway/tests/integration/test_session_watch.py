"""The gateway's watch and replay of a session's events, on a real NATS server. The watch sees what the agent's
outbox publishes on the session subject after the watch began (not before), picks the event asked for, gives up
at its bound, and leaves no subscription behind. The replay (the SSE stream) reads the store, then the live
events, subscribed before its first read: an event committed between the two is not missed."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from erpilot_contracts.subjects import session_events_subject
from erpilot_gateway.session_watch import replay_session, watch_session

pytestmark = pytest.mark.integration


def event(session_id: str, seq: int, type_: str, **data) -> dict:
    return {"seq": seq, "type": type_, "session_id": session_id, "occurred_at": "2026-10-01T12:00:00Z", "data": data}


async def publish(broker, session_id: str, seq: int, type_: str, **data) -> None:
    """As the agent's outbox relay does after the commit that stored the event: a core NATS publish."""
    await broker.publish(json.dumps(event(session_id, seq, type_, **data)).encode(), session_events_subject(session_id))


async def test_the_watch_sees_the_calls_event_published_after_it_began(broker):
    session_id = f"ses_watch_{uuid.uuid4().hex[:12]}"
    await publish(broker, session_id, 1, "approval_pending", call_id="c-1", pending_id="pa_before")
    subscriptions = len(broker.connection._subs)

    async with watch_session(broker, session_id) as watch:
        await publish(broker, session_id, 2, "tool_started", call_id="c-1")
        await publish(broker, f"{session_id}_other", 1, "approval_pending", call_id="c-1", pending_id="pa_elsewhere")
        await publish(broker, session_id, 3, "approval_pending", call_id="c-2", pending_id="pa_other_call")
        await publish(broker, session_id, 4, "approval_pending", call_id="c-1", pending_id="pa_1")
        found = await watch.first(lambda e: e["type"] == "approval_pending" and e["data"]["call_id"] == "c-1",
                                  timeout=5)
        started = time.monotonic()
        nothing = await watch.first(lambda e: e["type"] == "tool_finished", timeout=0.3)
        waited = time.monotonic() - started

    assert found["data"]["pending_id"] == "pa_1" and found["seq"] == 4
    assert nothing is None and 0.25 < waited < 2
    assert len(broker.connection._subs) == subscriptions


async def test_the_replay_subscribes_before_it_reads_the_store_so_an_event_committed_meanwhile_comes_live(broker):
    session_id = f"ses_replay_{uuid.uuid4().hex[:12]}"
    stored, reads = [event(session_id, 1, "message", text="hello")], []

    async def store_then_commit_another(after_seq: int, limit: int) -> tuple[list[dict], bool]:
        """The store's answer; the agent commits seq 2 and publishes it just after this read."""
        reads.append(after_seq)
        page = [e for e in stored if e["seq"] > after_seq][:limit]
        if len(stored) == 1:
            stored.append(event(session_id, 2, "run_started", run_id="run_1"))
            await publish(broker, session_id, 2, "run_started", run_id="run_1")
            await broker.connection.flush()
        return page, False

    subscriptions = len(broker.connection._subs)
    async with replay_session(broker, session_id, store_then_commit_another, after_seq=0) as replay:
        first = await replay.next(timeout=5)
        second = await replay.next(timeout=5)
        await publish(broker, session_id, 3, "run_finished", run_id="run_1")
        third = await replay.next(timeout=5)

    assert [first["seq"], second["seq"], third["seq"]] == [1, 2, 3]
    assert second["type"] == "run_started" and reads == [0]  # seq 2 came live, not from a second read
    assert len(broker.connection._subs) == subscriptions
