"""A batch's one transaction on PostgreSQL (erpilot_platform.batch_transaction, issue 31 item 3): a work that wrote
and then raised is rolled back to its savepoint, its outbox rows with it; the others' rows are committed once and
published after the batch's commit, in the order the works ran."""

from __future__ import annotations

import asyncio
import json
import uuid

import nats
import pytest
from sqlalchemy import func, select

from erpilot_contracts import subjects
from erpilot_platform.batches import GroupCommit
from erpilot_platform.uow import UnitOfWork

pytestmark = pytest.mark.integration

SUBJECT = f"{subjects.PREFIX}.cmd.outbox_test.batches"


@pytest.fixture
async def js(nats_url):
    nc = await nats.connect(nats_url)
    yield nc.jetstream()
    await nc.close()


async def _published(js, subject: str) -> list[str]:
    info = await js.stream_info(subjects.COMMANDS_STREAM.name, subjects_filter=subject)
    count = (info.state.subjects or {}).get(subject, 0)
    if not count:
        return []
    sub = await js.subscribe(subject, ordered_consumer=True)
    try:
        return [json.loads((await sub.next_msg(timeout=5)).data)["key"] for _ in range(count)]
    finally:
        await sub.unsubscribe()


async def _in_flight(group: GroupCommit, handlers) -> list[object]:
    async def member(handler):
        async with group.member():
            await asyncio.sleep(0)  # the others arrive meanwhile: in flight together
            return await handler()
    return await asyncio.gather(*(member(handler) for handler in handlers), return_exceptions=True)


@pytest.mark.parametrize("bad_at", [0, 1])
async def test_a_work_that_wrote_and_raised_leaves_nothing_and_the_others_commit_and_publish_in_order(
        outbox, broker, js, bad_at):
    engine, box = outbox
    box.publish_with(broker)
    uow = UnitOfWork(engine, lambda tx: tx, outbox=box)
    subject = f"{SUBJECT}.{uuid.uuid4().hex}"
    commits: list[int] = []

    def writer(key: str, *, fails: bool = False):
        async def work(tx) -> str:
            await tx.emit(subject, {"key": key}, msg_id=f"test.{key}.{uuid.uuid4().hex}")
            if fails:
                raise ValueError(f"{key} fails after its write")
            return key

        async def handler() -> str:
            result = await uow.run(work)
            commits.append(await _rows(engine, box.table))  # what is committed when its run returned
            return result
        return handler

    keys = ["a", "b", "c"]
    handlers = [writer(key, fails=i == bad_at) for i, key in enumerate(keys)]
    results = await _in_flight(GroupCommit(8), handlers)
    good = [key for i, key in enumerate(keys) if i != bad_at]
    assert [r for r in results if not isinstance(r, Exception)] == good
    assert isinstance(results[bad_at], ValueError)
    assert commits == [2, 2]  # both returned after the one commit of their two rows
    assert await _published(js, subject) == good  # the failed work's row neither committed nor published


async def _rows(engine, table) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(table))
