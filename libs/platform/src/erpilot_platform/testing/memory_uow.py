"""The unit of work in memory (``erpilot_platform.uow``'s contract without a database), for unit tests.

``MemoryUnitOfWork`` holds what is committed: the service's ``state`` (any deep-copyable object its memory
repositories work on), the inbox and every message emitted by committed units of work (``sent``, in order).
``run`` works on a deep copy that replaces the committed state only when ``work`` returns, so a raise (a
failpoint, a refusal) leaves nothing behind, as the SQL rollback does; units of work run one at a time (the
SQL row locks serialise the ones that touch the same rows). ``read`` works on a copy and may change nothing.
The clock is ``clock``: set it or ``advance`` it to move time; ``now()`` reads it.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from erpilot_platform import batches
from erpilot_platform.uow import ReadOnly

T = TypeVar("T")
S = TypeVar("S")
W = TypeVar("W")


@dataclass(frozen=True)
class Sent:
    """One message a committed unit of work emitted."""

    subject: str
    payload: dict[str, Any]
    msg_id: str | None


class MemoryTransaction(Generic[S]):
    """The memory twin of ``erpilot_platform.uow.Transaction``: ``state`` is this unit of work's copy."""

    def __init__(self, state: S, inbox: dict[str, dict[str, Any] | None], clock: Callable[[], datetime], *,
                 writable: bool):
        self.state = state
        self.inbox = inbox
        self.clock = clock
        self.writable = writable
        self.sent: list[Sent] = []
        self.emitted = False

    def require_writable(self) -> None:
        if not self.writable:
            raise ReadOnly("a read-only unit of work changes nothing")

    async def emit(self, subject: str, payload: BaseModel | dict[str, Any], msg_id: str | None = None) -> None:
        self.require_writable()
        body = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else copy.deepcopy(payload)
        self.sent.append(Sent(subject, body, msg_id))
        self.emitted = True

    def wrote_outbox(self) -> None:
        self.require_writable()
        self.emitted = True

    async def now(self) -> datetime:
        return self.clock()

    async def claim(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        self.require_writable()
        if key in self.inbox:
            return False, copy.deepcopy(self.inbox[key])
        self.inbox[key] = None
        return True, None

    async def record(self, key: str, response: dict[str, Any]) -> None:
        self.require_writable()
        self.inbox[key] = copy.deepcopy(response)


class MemoryUnitOfWork(Generic[S, W]):
    """``run`` / ``read`` / ``wake`` over ``state``; ``bind`` makes the service's ``Work`` of a transaction."""

    def __init__(self, state: S, bind: Callable[[MemoryTransaction[S]], W], *, now: datetime | None = None):
        self.state = state
        self.bind = bind
        self.inbox: dict[str, dict[str, Any] | None] = {}
        self.sent: list[Sent] = []
        self.time = now or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
        self.wakes = 0
        self._lock = asyncio.Lock()

    def clock(self) -> datetime:
        return self.time

    def advance(self, delta: timedelta | float) -> None:
        self.time += delta if isinstance(delta, timedelta) else timedelta(seconds=delta)

    async def run(self, work: Callable[[W], Awaitable[T]]) -> T:
        if (member := batches.current()) is not None:  # a batched consumer's message (erpilot_platform.batches)
            return await member.batch.run(member, self, lambda: MemoryShared(self), work, self.run)
        async with self._lock:
            state, inbox = copy.deepcopy((self.state, self.inbox))
            transaction = MemoryTransaction(state, inbox, self.clock, writable=True)
            result = await work(self.bind(transaction))
            self.state, self.inbox = state, inbox
            self.sent.extend(transaction.sent)
        if transaction.emitted:
            self.wake()
        return result

    async def read(self, work: Callable[[W], Awaitable[T]]) -> T:
        state, inbox = copy.deepcopy((self.state, self.inbox))
        return await work(self.bind(MemoryTransaction(state, inbox, self.clock, writable=False)))

    def wake(self) -> None:
        self.wakes += 1

    def sent_on(self, subject: str) -> list[dict[str, Any]]:
        """The payloads committed units of work emitted on ``subject``, in order."""
        return [message.payload for message in self.sent if message.subject == subject]


class MemoryShared(Generic[S, W]):
    """A batch's one transaction in memory: its state replaces the committed one at the batch's commit; each work
    runs on it after a copy (its savepoint) that a raise restores. The unit of work's lock is held from the first
    work to the commit, as the SQL batch holds its row locks."""

    def __init__(self, owner: MemoryUnitOfWork[S, W]):
        self.owner = owner
        self.broken = False
        self._open = False
        self._state: Any = None
        self._inbox: dict[str, dict[str, Any] | None] = {}
        self._sent: list[Sent] = []
        self._emitted = False

    async def step(self, work: Callable[[W], Awaitable[T]]) -> T:
        if not self._open:
            await self.owner._lock.acquire()
            self._open = True
            self._state, self._inbox = copy.deepcopy((self.owner.state, self.owner.inbox))
        savepoint = copy.deepcopy((self._state, self._inbox))
        transaction = MemoryTransaction(self._state, self._inbox, self.owner.clock, writable=True)
        try:
            result = await work(self.owner.bind(transaction))
        except BaseException:
            self._state, self._inbox = savepoint  # ROLLBACK TO SAVEPOINT
            raise
        self._sent.extend(transaction.sent)
        self._emitted = self._emitted or transaction.emitted
        return result

    async def commit(self) -> None:
        if not self._open:
            return
        self.owner.state, self.owner.inbox = self._state, self._inbox
        self.owner.sent.extend(self._sent)
        self._release()
        if self._emitted:
            self.owner.wake()

    async def abort(self) -> None:
        if self._open:
            self._release()

    def _release(self) -> None:
        self._open = False
        self.owner._lock.release()
