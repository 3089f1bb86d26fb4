"""The gateway's watch on a session's events, on a real NATS server: it sees what the agent's outbox publishes
into the session stream after the watch began (not before), picks the event asked for, gives up at its bound,
and leaves no subscription behind."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from erpilot_contracts.subjects import SESSIONS_STREAM, session_events_subject
from erpilot_gateway.session_watch import watch_session

pytestmark = pytest.mark.integration


async def publish(broker, session_id: str, seq: int, type_: str, **data) -> None:
    """As the agent's outbox relay does: a JetStream publish into ERPILOT_SESSIONS."""
    event = {"seq": seq, "type": type_, "session_id": session_id, "occurred_at": "2026-10-01T12:00:00Z",
             "data": data}
    await broker.publish(json.dumps(event).encode(), session_events_subject(session_id), stream=SESSIONS_STREAM.name)


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
