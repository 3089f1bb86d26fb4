"""Several session events appended in one statement: stored and queued in ``seq`` order (the relay publishes
outbox rows in id order), by a statement SQLAlchemy compiles once and caches (``outbox.insert_rows``)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from erpilot_agent.adapters import statements
from erpilot_agent.adapters.tables import outbox as outbox_rows
from erpilot_agent.adapters.tables import session_events
from erpilot_platform.outbox import insert_rows, name_of

from .conftest import new_session

pytestmark = pytest.mark.integration


async def test_events_appended_together_keep_their_order_in_the_outbox(engine, uow):
    session_id = await new_session(uow)
    events = [("tool_started", {"n": 1}), ("approval_pending", {"n": 2}), ("approval_resolved", {"n": 3})]
    async with engine.begin() as conn:
        seqs = await statements.append_events(conn, uow.outbox, session_id, events)
    async with engine.connect() as conn:
        queued = (await conn.execute(select(outbox_rows.c.msg_id, outbox_rows.c.payload)
                                     .where(outbox_rows.c.msg_id.like(f"session:{session_id}:%"))
                                     .order_by(outbox_rows.c.id))).all()
        stored = (await conn.execute(select(session_events.c.seq, session_events.c.type)
                                     .where(session_events.c.session_id == session_id)
                                     .order_by(session_events.c.seq))).all()
    assert [name_of(msg_id) for msg_id, _ in queued] == [f"session:{session_id}:{seq}" for seq in seqs]
    assert [payload["type"] for _, payload in queued] == [type_ for type_, _ in events]
    assert [tuple(row) for row in stored] == [(seq, type_) for seq, (type_, _) in zip(seqs, events, strict=True)]


@pytest.mark.parametrize("count", [1, 3])
def test_an_insert_of_rows_is_cacheable(count):
    """A multi-row VALUES has no cache key (compiled on every execution); ``insert_rows`` always has one."""
    rows = [{"session_id": "s", "seq": i, "type": "message", "data": {}, "occurred_at": None} for i in range(count)]
    assert insert_rows(session_events, rows)._generate_cache_key() is not None
