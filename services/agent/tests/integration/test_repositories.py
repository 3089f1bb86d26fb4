"""The repository cases (``repository_cases``) on PostgreSQL: the agent's ``SqlWork`` in the platform's
``UnitOfWork`` with the agent's outbox, as ``app.build`` composes it; the same cases run on the memory ``Work``
in tests/unit/test_repositories.py."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from erpilot_agent.adapters import tables
from erpilot_agent.adapters.driver_locks import SqlDriverLocks
from erpilot_agent.adapters.sql_work import SqlWork
from erpilot_platform import advisory_locks
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
