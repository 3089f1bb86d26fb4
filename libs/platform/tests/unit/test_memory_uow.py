"""The memory unit of work keeps the SQL one's promises: a raise leaves nothing, a read changes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from erpilot_platform.testing.memory_uow import MemoryTransaction, MemoryUnitOfWork
from erpilot_platform.uow import ReadOnly

pytestmark = pytest.mark.unit


@dataclass
class State:
    rows: dict[str, int] = field(default_factory=dict)


class Work:
    def __init__(self, tx: MemoryTransaction[State]):
        self.tx, self.rows = tx, tx.state.rows
        self.emit, self.now, self.claim, self.record = tx.emit, tx.now, tx.claim, tx.record


def _uow() -> MemoryUnitOfWork[State, Work]:
    return MemoryUnitOfWork(State(), Work)


async def test_a_returning_work_commits_its_rows_and_messages_and_wakes_the_relay():
    uow = _uow()

    async def work(unit: Work) -> int:
        unit.rows["a"] = 1
        await unit.emit("erpilot.v1.evt.x.happened", {"a": 1}, msg_id="x.a")
        return 7

    assert await uow.run(work) == 7
    assert uow.state.rows == {"a": 1} and uow.sent_on("erpilot.v1.evt.x.happened") == [{"a": 1}]
    assert uow.wakes == 1


async def test_a_raise_leaves_nothing_behind():
    uow = _uow()

    async def work(unit: Work) -> None:
        unit.rows["a"] = 1
        await unit.emit("s", {"a": 1})
        await unit.claim("k")
        raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        await uow.run(work)
    assert uow.state.rows == {} and uow.sent == [] and uow.inbox == {} and uow.wakes == 0


async def test_a_read_sees_what_is_committed_and_may_not_emit_or_claim():
    uow = _uow()
    await uow.run(lambda unit: _set(unit, "a", 2))
    assert await uow.read(lambda unit: _get(unit, "a")) == 2
    for change in (lambda unit: unit.emit("s", {}), lambda unit: unit.claim("k")):
        with pytest.raises(ReadOnly):
            await uow.read(change)


async def test_the_inbox_answers_a_claimed_key_once():
    uow = _uow()

    async def handle(unit: Work) -> tuple[bool, dict | None]:
        claimed, recorded = await unit.claim("cmd:1")
        if claimed:
            await unit.record("cmd:1", {"answer": 1})
        return claimed, recorded

    assert await uow.run(handle) == (True, None)
    assert await uow.run(handle) == (False, {"answer": 1})


async def _set(unit: Work, key: str, value: int) -> None:
    unit.rows[key] = value


async def _get(unit: Work, key: str) -> int:
    return unit.rows[key]
