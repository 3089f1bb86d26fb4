"""The batch runner (erpilot_platform.batches, issue 31 item 3) on the memory unit of work: the messages in flight
together share one transaction, a failing one rolls back alone, and nobody's ``unit.run`` returns before the
batch committed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from sqlalchemy.exc import DBAPIError

from erpilot_platform.batches import (
    BatchLost,
    GroupCommit,
    NetworkWaitInBatch,
    batched,
    is_batched,
    refuse_network_wait,
)
from erpilot_platform.testing.memory_uow import MemoryShared, MemoryTransaction, MemoryUnitOfWork

pytestmark = pytest.mark.unit


@dataclass
class State:
    rows: dict[str, int] = field(default_factory=dict)


class Work:
    def __init__(self, tx: MemoryTransaction[State]):
        self.rows = tx.state.rows
        self.emit = tx.emit


class Deadlock(Exception):
    sqlstate = "40P01"


def _deadlock() -> DBAPIError:
    return DBAPIError("UPDATE ...", {}, Deadlock("deadlock detected"))


def _writer(uow: MemoryUnitOfWork[State, Work], key: str, seen: dict[str, dict[str, int]], *,
            fail: BaseException | None = None):
    """A handler: one unit of work writing ``key`` (or raising ``fail``); records what was committed when its
    ``run`` returned."""
    async def work(unit: Work) -> str:
        unit.rows[key] = len(unit.rows)
        await unit.emit("evt.written", {"key": key}, msg_id=key)
        if fail is not None:
            raise fail
        return key

    async def handler() -> str:
        result = await uow.run(work)
        seen[key] = dict(uow.state.rows)  # what is committed when the use case goes on (its failpoint, its reply)
        return result
    return handler


async def _in_flight(group: GroupCommit, handlers) -> list[object]:
    async def member(handler):
        async with group.member():
            await asyncio.sleep(0)  # the others arrive while this one is parsed: they are in flight together
            return await handler()
    return await asyncio.gather(*(member(handler) for handler in handlers), return_exceptions=True)


async def test_a_batch_of_one_is_one_transaction_committed_before_its_run_returns():
    uow, seen = MemoryUnitOfWork(State(), Work), {}
    assert await _in_flight(GroupCommit(8), [_writer(uow, "a", seen)]) == ["a"]
    assert seen["a"] == {"a": 0} == uow.state.rows
    assert [m.msg_id for m in uow.sent] == ["a"] and uow.wakes == 1


async def test_messages_in_flight_together_share_one_commit_and_none_returns_before_it():
    uow, seen = MemoryUnitOfWork(State(), Work), {}
    commits: list[dict[str, int]] = []
    assign = type(uow).__setattr__

    class Watch(MemoryUnitOfWork[State, Work]):
        def __setattr__(self, name, value):
            if name == "state" and hasattr(self, "state"):
                commits.append(dict(value.rows))
            assign(self, name, value)

    uow = Watch(State(), Work)
    results = await _in_flight(GroupCommit(8), [_writer(uow, key, seen) for key in "abc"])
    assert results == ["a", "b", "c"]
    assert commits == [{"a": 0, "b": 1, "c": 2}]  # one commit for the three
    assert all(seen[key] == {"a": 0, "b": 1, "c": 2} for key in "abc")  # each returned after it
    assert [m.msg_id for m in uow.sent] == ["a", "b", "c"]  # the outbox's order: the works' order


async def test_one_bad_message_rolls_back_alone_and_the_others_commit():
    uow, seen = MemoryUnitOfWork(State(), Work), {}
    handlers = [_writer(uow, "a", seen), _writer(uow, "bad", seen, fail=ValueError("bug")), _writer(uow, "c", seen)]
    results = await _in_flight(GroupCommit(8), handlers)
    assert results[0] == "a" and results[2] == "c" and isinstance(results[1], ValueError)
    assert uow.state.rows == {"a": 0, "c": 1}  # "bad" rolled back to its savepoint, its row and its event
    assert [m.msg_id for m in uow.sent] == ["a", "c"]
    assert "bad" not in seen


async def test_a_failing_first_work_leaves_the_transaction_to_the_next():
    uow, seen = MemoryUnitOfWork(State(), Work), {}
    results = await _in_flight(GroupCommit(8), [_writer(uow, "bad", seen, fail=ValueError("bug")),
                                                _writer(uow, "b", seen)])
    assert isinstance(results[0], ValueError) and results[1] == "b"
    assert uow.state.rows == {"b": 0} and [m.msg_id for m in uow.sent] == ["b"]


async def test_a_deadlocked_work_runs_again_on_its_own_after_the_batch_committed():
    uow, seen, tries = MemoryUnitOfWork(State(), Work), {}, []

    async def work(unit: Work) -> str:
        tries.append(dict(uow.state.rows))  # what was committed when it ran
        unit.rows["d"] = 9
        if len(tries) == 1:
            raise _deadlock()
        return "d"

    async def deadlocked() -> str:
        return await uow.run(work)

    results = await _in_flight(GroupCommit(8), [_writer(uow, "a", seen), deadlocked, _writer(uow, "c", seen)])
    assert results == ["a", "d", "c"]
    assert tries == [{}, {"a": 0, "c": 1}]  # the second try after the batch of a and c committed
    assert uow.state.rows == {"a": 0, "c": 1, "d": 9}


async def test_a_handler_that_refuses_before_its_work_does_not_hold_up_the_batch():
    uow, seen = MemoryUnitOfWork(State(), Work), {}

    async def refuses() -> None:
        raise LookupError("refused before any unit of work")

    results = await _in_flight(GroupCommit(8), [refuses, _writer(uow, "b", seen)])
    assert isinstance(results[0], LookupError) and results[1] == "b" and uow.state.rows == {"b": 0}


async def test_a_batch_holds_at_most_its_limit_and_a_second_unit_of_work_runs_on_its_own():
    uow, seen = MemoryUnitOfWork(State(), Work), {}
    commits = []
    original = MemoryUnitOfWork.__setattr__

    class Watch(MemoryUnitOfWork[State, Work]):
        def __setattr__(self, name, value):
            if name == "state" and hasattr(self, "state"):
                commits.append(sorted(value.rows))
            original(self, name, value)

    uow = Watch(State(), Work)

    async def twice() -> str:
        await uow.run(lambda unit: _set(unit, "t1"))
        assert "t1" in uow.state.rows  # the first was committed (with its batch) before the second ran
        return await uow.run(lambda unit: _set(unit, "t2"))

    results = await _in_flight(GroupCommit(2), [_writer(uow, "a", seen), twice, _writer(uow, "c", seen)])
    assert results == ["a", "t2", "c"]
    assert commits[0] == ["a", "t1"]  # the first batch: two members
    assert set(uow.state.rows) == {"a", "t1", "t2", "c"} and len(commits) == 3  # c's batch, t2 on its own


async def _set(unit: Work, key: str) -> str:
    unit.rows[key] = 1
    return key


def test_batched_is_a_declared_property_of_a_handler():
    async def handle(msg, deps):
        return None
    assert not is_batched(handle)
    assert is_batched(batched(handle))


async def test_a_batch_lost_before_its_commit_runs_every_work_again_on_its_own(monkeypatch):
    uow, seen = MemoryUnitOfWork(State(), Work), {}

    async def lost(self):
        await self.abort()
        raise BatchLost("connection lost before the COMMIT")

    monkeypatch.setattr(MemoryShared, "commit", lost)
    assert await _in_flight(GroupCommit(8), [_writer(uow, key, seen) for key in "ab"]) == ["a", "b"]
    assert uow.state.rows == {"a": 0, "b": 1} and [m.msg_id for m in uow.sent] == ["a", "b"]  # once each


async def test_a_commit_of_unknown_outcome_reaches_every_member_as_a_transient_failure(monkeypatch):
    uow, seen = MemoryUnitOfWork(State(), Work), {}

    async def unknown(self):
        await self.abort()
        raise ConnectionResetError("connection lost during the COMMIT")

    monkeypatch.setattr(MemoryShared, "commit", unknown)
    results = await _in_flight(GroupCommit(8), [_writer(uow, key, seen) for key in "ab"])
    assert all(isinstance(result, ConnectionResetError) for result in results)  # nak'd: redelivered, idempotent
    assert not seen  # no use case went on as if it had committed


async def test_a_batched_handler_may_not_wait_on_the_network_before_its_unit_of_work_only_after_it():
    uow, waits = MemoryUnitOfWork(State(), Work), []

    async def asks_first() -> None:
        refuse_network_wait("req.other")

    async def asks_after() -> str:
        key = await uow.run(lambda unit: _set(unit, "k"))
        refuse_network_wait("req.other")  # committed: no transaction held open across it
        waits.append(key)
        return key

    results = await _in_flight(GroupCommit(8), [asks_first, asks_after])
    assert isinstance(results[0], NetworkWaitInBatch) and results[1] == "k" and waits == ["k"]
    refuse_network_wait("outside any batch")  # one by one: nothing to refuse
