"""Issue 31: the task that commits a unit of work publishes its outbox rows, without a relay transaction; the
published rows are deleted by the next unit of work (or the relay's next look); rows a crash left (committed and not
published, or published and not deleted) are published by the relay at start-up, a copy dropped by the stream."""

from __future__ import annotations

import json
import uuid

import nats
import pytest
from sqlalchemy import func, select, update

from erpilot_contracts import subjects
from erpilot_platform.loops import Soon
from erpilot_platform.outbox import STALE_AFTER_SECONDS, Outbox
from erpilot_platform.uow import UnitOfWork

pytestmark = pytest.mark.integration

# A subject of the command stream no service consumes, so no other test's service sees these messages.
SUBJECT = f"{subjects.PREFIX}.cmd.outbox_test.published_on_commit"


@pytest.fixture
def outbox(outbox_rows_table):
    return outbox_rows_table  # (engine, table): these tests make their Outbox objects themselves


@pytest.fixture
async def js(nats_url):
    nc = await nats.connect(nats_url)
    yield nc.jetstream()
    await nc.close()


def _uow(engine, box: Outbox) -> UnitOfWork:
    return UnitOfWork(engine, lambda tx: tx, outbox=box)


def _emitting(mark: str, count: int = 1):
    async def work(tx) -> None:
        for i in range(count):
            await tx.emit(f"{SUBJECT}.{mark}", {"i": i}, msg_id=f"test.{mark}.{i}")
    return work


async def _nothing(tx) -> None:
    return None


async def _stored(js, mark: str, *, subject: str | None = None, stream: str = subjects.COMMANDS_STREAM.name
                  ) -> list[int]:
    """The ``i`` of every message of ``mark`` (or on ``subject``) the stream holds, in stream order."""
    subject = subject or f"{SUBJECT}.{mark}"
    info = await js.stream_info(stream, subjects_filter=subject)
    count = (info.state.subjects or {}).get(subject, 0)
    if not count:
        return []
    sub = await js.subscribe(subject, ordered_consumer=True)
    try:
        return [json.loads((await sub.next_msg(timeout=5)).data)["i"] for _ in range(count)]
    finally:
        await sub.unsubscribe()


async def _rows(engine, table) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(table))


async def test_the_committing_task_publishes_its_rows_and_the_next_unit_of_work_deletes_them(outbox, broker, js):
    engine, table = outbox
    box = Outbox(table, lock_key=hash(table.schema) & 0x7FFFFFFF)
    box.publish_with(broker)
    uow, mark = _uow(engine, box), uuid.uuid4().hex

    await uow.run(_emitting(mark, 3))
    assert await _stored(js, mark) == [0, 1, 2]  # at once, in order, and no relay pass ran
    assert await _rows(engine, table) == 3  # published, not yet deleted

    await uow.run(_nothing)  # any next write of the service deletes them, in its own transaction
    assert await _rows(engine, table) == 0
    assert await _stored(js, mark) == [0, 1, 2]


async def test_a_rolled_back_unit_of_work_leaves_the_published_rows_to_the_next_one(outbox, broker, js):
    engine, table = outbox
    box = Outbox(table, lock_key=hash(table.schema) & 0x7FFFFFFF)
    box.publish_with(broker)
    uow, mark = _uow(engine, box), uuid.uuid4().hex
    await uow.run(_emitting(mark))

    async def refused(tx) -> None:
        raise LookupError("refused")

    with pytest.raises(LookupError):
        await uow.run(refused)
    assert await _rows(engine, table) == 1
    await uow.run(_nothing)
    assert await _rows(engine, table) == 0


async def test_a_pass_deletes_what_no_unit_of_work_deleted_and_publishes_nothing_again(
        outbox, broker, js):
    engine, table = outbox
    box = Outbox(table, lock_key=hash(table.schema) & 0x7FFFFFFF)
    box.publish_with(broker)
    uow, marks = _uow(engine, box), [uuid.uuid4().hex for _ in range(3)]
    for mark in marks:
        await uow.run(_emitting(mark))
    assert await _rows(engine, table) == 1  # each unit of work deleted the rows of the one before
    assert isinstance(await box.delete_published_pass(engine), Soon)  # not yet: a unit of work may come first
    assert await _rows(engine, table) == 1

    await box.delete_published_pass(engine, after=0)  # the idle service's last row
    assert await _rows(engine, table) == 0
    assert [await _stored(js, mark) for mark in marks] == [[0], [0], [0]]


async def _start_up_pass(engine, table, broker) -> None:
    """A restarted process's relay (a fresh Outbox): its start-up pass publishes every row there is."""
    restarted = Outbox(table, lock_key=hash(table.schema) & 0x7FFFFFFF)
    restarted.wake()  # as ``run`` starts: publish what a crash left behind
    await restarted.relay_once(engine, broker)
    assert await _rows(engine, table) == 0


async def test_a_row_committed_and_never_published_is_published_by_the_relay_at_start_up(outbox, broker, js):
    engine, table = outbox
    box = Outbox(table, lock_key=hash(table.schema) & 0x7FFFFFFF)  # no broker: as if it died after the commit
    mark = uuid.uuid4().hex
    await _uow(engine, box).run(_emitting(mark, 2))
    assert await _stored(js, mark) == []

    await _start_up_pass(engine, table, broker)
    assert await _stored(js, mark) == [0, 1]


async def test_a_row_published_and_never_deleted_is_published_again_at_start_up_and_dropped_by_the_stream(
        outbox, broker, js):
    engine, table = outbox
    box = Outbox(table, lock_key=hash(table.schema) & 0x7FFFFFFF)
    box.publish_with(broker)
    mark = uuid.uuid4().hex
    await _uow(engine, box).run(_emitting(mark, 2))  # then the process dies before any delete

    await _start_up_pass(engine, table, broker)
    assert await _stored(js, mark) == [0, 1]  # the second publish of each was a duplicate


async def test_the_safety_look_leaves_young_rows_to_the_replica_that_published_them(outbox, broker, js):
    engine, table = outbox
    box = Outbox(table, lock_key=hash(table.schema) & 0x7FFFFFFF)
    await _uow(engine, box).run(_emitting(uuid.uuid4().hex))
    assert not await box.has_pending(engine)

    async with engine.begin() as conn:
        await conn.execute(update(table).values(
            created_at=func.now() - func.make_interval(0, 0, 0, 0, 0, 0, STALE_AFTER_SECONDS + 1)))
    assert await box.has_pending(engine)
