"""Two deliveries of one ``cmd.agent.create_session`` at once (a JetStream redelivery, or a duplicate, racing the
first): both find no session, one insert wins, and the other must answer with that session instead of failing
on the primary key (a failed handler is retried, or dead-lettered when it keeps failing)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import func, select

from erpilot_agent.adapters import tables
from erpilot_agent.adapters.sql_work import SqlWork
from erpilot_agent.service_layer import sessions
from erpilot_contracts.agent.v1 import CreateSessionV1
from erpilot_platform import advisory_locks
from erpilot_platform.outbox import Outbox
from erpilot_platform.refusals import Refused
from erpilot_platform.uow import UnitOfWork

pytestmark = pytest.mark.integration


class BothLookFirst:
    """Holds each delivery after its first look for the session until both have looked, so both find none."""

    def __init__(self) -> None:
        self.looked = 0
        self.both = asyncio.Event()

    def bind(self, tx) -> SqlWork:
        work = SqlWork(tx)
        look = work.sessions.get

        async def get(session_id: str, *, lock: bool = False):
            found = await look(session_id, lock=lock)
            if not self.both.is_set():
                self.looked += 1
                if self.looked >= 2:
                    self.both.set()
                await asyncio.wait_for(self.both.wait(), 30)
            return found

        work.sessions.get = get
        return work


def held_uow(engine) -> UnitOfWork:
    return UnitOfWork(engine, BothLookFirst().bind, outbox=Outbox(tables.outbox, lock_key=advisory_locks.AGENT_OUTBOX))


async def test_two_concurrent_deliveries_of_one_session_store_it_once_and_both_answer(engine):
    uow = held_uow(engine)
    create = CreateSessionV1(session_id=f"ses_{uuid.uuid4().hex[:20]}", owner="alice", title="race")

    first, second = await asyncio.gather(sessions.create_session(uow, create), sessions.create_session(uow, create))

    assert first == second and first.session_id == create.session_id
    async with engine.connect() as conn:
        stored = await conn.scalar(select(func.count()).select_from(tables.sessions)
                                   .where(tables.sessions.c.session_id == create.session_id))
    assert stored == 1


async def test_a_concurrent_create_by_another_owner_is_still_refused(engine):
    uow = held_uow(engine)
    session_id = f"ses_{uuid.uuid4().hex[:20]}"

    outcomes = await asyncio.gather(
        sessions.create_session(uow, CreateSessionV1(session_id=session_id, owner="alice")),
        sessions.create_session(uow, CreateSessionV1(session_id=session_id, owner="mallory")),
        return_exceptions=True)

    refused = [o for o in outcomes if isinstance(o, Refused)]
    assert len(refused) == 1 and refused[0].code == "idempotency_conflict", outcomes
