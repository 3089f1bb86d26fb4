"""The outbox relay's promise, from the outside: once it has done its work the outbox is empty, and every row went
out once. A relay that publishes but never deletes its rows passed every e2e test (JetStream's de-duplication
drops its re-publishes within the window, so no consumer saw them) and only torture caught it (#32).

Written against what a service does with its outbox (business transactions ``emit`` rows through the unit of
work, ``Outbox.run`` relays them) and against what goes out on NATS, not against how the relay takes its rows:
a core subscription sees every publish, also one the stream drops as a duplicate."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter

import nats
import pytest
from sqlalchemy import func, select

from erpilot_contracts import subjects
from erpilot_platform.uow import Transaction, UnitOfWork

pytestmark = pytest.mark.integration
DEADLINE_SECONDS = 15.0


async def until(check, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE_SECONDS
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {DEADLINE_SECONDS}s: {what}")
        await asyncio.sleep(0.05)


async def test_once_the_relay_has_done_its_work_the_outbox_is_empty_and_each_row_went_out_once(
        outbox, broker, nats_url):
    engine, box = outbox
    uow = UnitOfWork(engine, lambda tx: tx, outbox=box)
    # A subject of the command stream no service consumes, so no other test's consumer sees these messages.
    subject = f"{subjects.PREFIX}.cmd.outbox_test.relay_{uuid.uuid4().hex[:12]}"
    published: Counter[int] = Counter()
    nc = await nats.connect(nats_url)

    async def count(msg) -> None:
        published[json.loads(msg.data)["n"]] += 1

    await nc.subscribe(subject, cb=count)
    await nc.flush()

    async def emit(n: int) -> None:
        async def work(tx: Transaction) -> None:
            await tx.emit(subject, {"n": n})
        await uow.run(work)

    async def outbox_empty() -> bool:
        async with engine.connect() as conn:
            return await conn.scalar(select(func.count()).select_from(box.table)) == 0

    relay = asyncio.create_task(box.run(engine, broker))  # as every service runs it
    try:
        for n in range(3):  # three business transactions, each with its row
            await emit(n)
        await until(lambda: _seen(published, {0, 1, 2}), "rows 0-2 published")
        await until(outbox_empty, "the outbox empty after the relay published everything")

        # More work after that: the relay's next pass publishes the new row, and no earlier one again. The
        # relay goes in id order and NATS keeps one connection's order, so by the time the new row is here, a
        # pass that re-published an earlier row has shown it too.
        await emit(3)
        await until(lambda: _seen(published, {0, 1, 2, 3}), "row 3 published")
        await until(outbox_empty, "the outbox empty again")
        assert published == Counter({0: 1, 1: 1, 2: 1, 3: 1})
    finally:
        relay.cancel()
        await asyncio.gather(relay, return_exceptions=True)
        await nc.close()


async def _seen(published: Counter[int], ns: set[int]) -> bool:
    return ns <= set(published)
