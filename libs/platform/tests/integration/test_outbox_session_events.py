"""The outbox relay sends a session event on core NATS (issue 31): the agent's database is its one store, so it
reaches whoever listens live and no stream keeps a copy; the relay then deletes its row as for any other."""

from __future__ import annotations

import asyncio
import json
import uuid

import nats
import nats.js.errors
import pytest
from sqlalchemy import func, select

from erpilot_contracts.subjects import session_events_subject

pytestmark = pytest.mark.integration


async def test_a_session_event_goes_out_live_on_core_nats_and_no_stream_stores_it(outbox, broker, nats_url):
    engine, box = outbox
    subject = session_events_subject(f"ses_{uuid.uuid4().hex[:12]}")
    nc = await nats.connect(nats_url)
    try:
        received: asyncio.Queue = asyncio.Queue()
        await nc.subscribe(subject, cb=received.put)
        await nc.flush()
        async with engine.begin() as conn:
            await box.add(conn, subject, {"seq": 1, "type": "message", "data": {"text": "hello"}})

        assert await box.publish_pending(engine, broker) == 1
        message = await asyncio.wait_for(received.get(), timeout=5)
        assert json.loads(message.data)["seq"] == 1
        with pytest.raises(nats.js.errors.NotFoundError):
            await nc.jetstream().find_stream_name_by_subject(subject)  # no stream on the session subjects
        async with engine.connect() as conn:
            assert await conn.scalar(select(func.count()).select_from(box.table)) == 0
    finally:
        await nc.close()
