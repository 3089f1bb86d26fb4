"""The repository cases (``repository_cases``) on PostgreSQL: the agent's ``SqlWork`` in the platform's
``UnitOfWork`` with the agent's outbox, as ``app.build`` composes it; the same cases run on the memory ``Work``
in tests/unit/test_repositories.py."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, text

from erpilot_agent.adapters import tables
from erpilot_agent.adapters.driver_locks import SqlDriverLocks
from erpilot_agent.adapters.sql_work import SqlWork
from erpilot_platform import advisory_locks, db
from erpilot_platform.db import create_engine
from erpilot_platform.outbox import Outbox, name_of
from erpilot_platform.uow import UnitOfWork

from ..repository_cases import *  # noqa: F403 (the shared cases)
from ..repository_cases import Backend

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def engine(database_url):
    engine = create_engine(database_url, pool_size=4)
    yield engine
    await engine.dispose()


@pytest.fixture
def repos(engine) -> Backend:
    uow = UnitOfWork(engine, SqlWork, outbox=Outbox(tables.outbox, lock_key=advisory_locks.AGENT_OUTBOX))

    async def outbox(session_id: str) -> list:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(tables.outbox.c.msg_id, tables.outbox.c.payload)
                                       .where(tables.outbox.c.msg_id.like(f"session:{session_id}:%"))
                                       .order_by(tables.outbox.c.id))).all()
        return [(name_of(row.msg_id), row.payload) for row in rows]

    return Backend(uow, outbox, lambda: None, SqlDriverLocks(engine))  # each transaction: a later clock of its own


async def test_a_drivers_lock_outlives_idling_past_the_pools_idle_timeout(database_url, monkeypatch):
    """Pooled connections idle ``db.IDLE_SESSION_SECONDS`` are closed by PostgreSQL (issue 31 item 5); the one
    holding a session's drive lock idles between the drive's transactions and must not be: closing it would free the
    lock under a live driver, and a second driver could take it."""
    monkeypatch.setattr(db, "IDLE_SESSION_SECONDS", 1)
    engine = db.create_engine(database_url, pool_size=2)
    try:
        locks = SqlDriverLocks(engine)
        async with locks.hold("ses_idle_lock") as held:
            assert held
            await asyncio.sleep(2.5)  # idle past the timeout while driving (a model's step, say)
            async with locks.hold("ses_idle_lock") as second:
                assert not second  # still held: no second driver
        async with engine.connect() as conn:  # let go: its connection times out again like any other
            assert await conn.scalar(text("SELECT current_setting('idle_session_timeout')")) == "1s"
    finally:
        await engine.dispose()
