"""Batches where it is busy (issue 31 item 3): the messages a durable consumer handles at the same time share one
transaction, as group commit does.

A consumer declared ``batched`` (see ``batched``) runs each message's handler as today, in its own task, but as a
*member* of the endpoint's open batch (``GroupCommit.member``). The handler's use case still calls
``unit.run(work)``; inside a batch the unit of work (``uow.UnitOfWork`` / the memory one) hands ``work`` to the
batch (``Batch.run``), which runs it on the batch's one connection: the first work of a transaction runs on it
directly (a batch of one costs BEGIN, work, COMMIT, as before), each later one under a SAVEPOINT, so a work that
raises rolls back only itself. ``run`` returns to the use case only once the whole batch has committed and its
outbox rows were published (in the order the works ran): what a use case does after ``unit.run`` (an
``*.after_db_commit`` failpoint, its reply, then the ack) still happens after the commit of its effects.

The batch commits when its last member finished its work (or left without any); a batch never waits to fill:
members are the messages that are in flight together (at most ``limit``, the consumer's workers). A member that
arrives while a batch commits opens the next one.

Failures:
- a work that raises is rolled back to its savepoint (a first work: its transaction, nothing else is in it yet)
  and its message goes through the error policy as before (nak, dead letter); the others commit;
- a serialization failure or deadlock in a work: rolled back to its savepoint, and the work runs again on a
  transaction of its own (with the usual retries) once the batch ended, so it no longer waits on the batch's locks;
- the batch's connection lost before the commit, or a commit PostgreSQL refused: nothing of the batch remains and
  every member runs its work again on a transaction of its own;
- a connection lost during the COMMIT (outcome unknown): every member raises it, as a lone transaction's would
  (their messages are redelivered; the consumers are idempotent).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from opentelemetry import metrics

log = logging.getLogger(__name__)
T = TypeVar("T")
H = TypeVar("H", bound=Callable[..., Any])

BATCHED = "__erpilot_batched__"


def batched(handler: H) -> H:
    """Declare that a durable consumer's handler may share a transaction with the messages in flight beside it.

    Only for a handler whose messages' effects are all in ONE ``unit.run`` of the service's unit of work, with no
    network wait before it or inside it (a batch holds its transaction open until every member finished its
    work): what it does after ``unit.run`` runs after the batch's commit. A handler that sends a request, or
    commits something before it asks another service, stays one by one."""
    setattr(handler, BATCHED, True)
    return handler


def is_batched(handler: Callable[..., Any]) -> bool:
    return bool(getattr(handler, BATCHED, False))


class BatchLost(Exception):
    """The batch's transaction ended without its commit (connection lost before it, or the commit refused)."""


class Shared(Protocol):
    """One batch's transaction in one unit of work (``UnitOfWork.shared`` / ``MemoryUnitOfWork.shared``)."""

    owner: Any
    broken: bool  # the transaction is lost: no work can join it, its commit is not tried

    async def step(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``work`` in the transaction: under a savepoint unless it is the transaction's first; rolled back
        to it (or entirely) when ``work`` raises."""
        ...

    async def commit(self) -> None:
        """Commit and publish the outbox rows of every work, in order (``BatchLost`` if nothing was committed)."""
        ...

    async def abort(self) -> None:
        """Roll back (the batch is lost)."""
        ...


class Member:
    def __init__(self, batch: Batch):
        self.batch = batch
        self.done = False


_ending: set[asyncio.Task[None]] = set()
# How many messages each batch held (1: no one else was in flight); a batch with no work commits nothing.
batch_members = metrics.get_meter("erpilot").create_histogram(
    "erpilot.consumer.batch_members", description="messages of a batched consumer sharing one transaction")
# The member the current task's handler is (None outside a batched consumer, and once its work ran).
_current: ContextVar[Member | None] = ContextVar("batch member", default=None)


def current() -> Member | None:
    return _current.get()


class NetworkWaitInBatch(RuntimeError):
    """A handler declared ``batched`` waited on the network before its unit of work (a bug: declare it one by
    one)."""


def refuse_network_wait(what: str) -> None:
    """Raise if the current task is a batch member that has not run its unit of work yet: the batch's transaction
    (and its row locks) would stay open across this wait (``broker.request`` calls it)."""
    if _current.get() is not None:
        raise NetworkWaitInBatch(f"a batched handler waits on {what} before its unit of work; the batch's "
                                 "transaction would stay open across it: declare this handler one by one")


class Batch:
    """The members in flight together, their one transaction (opened by the first work) and its outcome."""

    def __init__(self) -> None:
        self.members = 0
        self.working = 0
        self.closed = False  # committing (or ended): no member joins any more
        self.shared: Shared | None = None
        self._lock = asyncio.Lock()  # the works take turns on the one connection
        self._outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def join(self) -> Member:
        self.members += 1
        self.working += 1
        return Member(self)

    def finish(self, member: Member) -> None:
        """``member`` has no more work for the batch; the last one to finish ends it."""
        if member.done:
            return
        member.done = True
        self.working -= 1
        if self.working == 0:
            self.closed = True
            # A task of its own: a member cancelled while it waits does not cancel the commit of the others (kept
            # in ``_ending`` until done: the loop holds tasks only weakly).
            task = asyncio.create_task(self._end())
            _ending.add(task)
            task.add_done_callback(_ending.discard)

    async def _end(self) -> None:
        try:
            if self.shared is not None:
                batch_members.record(self.members)
                log.debug("batch of %d messages ends", self.members)
                if self.shared.broken:
                    await self.shared.abort()
                    raise BatchLost("the batch's connection was lost before its commit")
                await self.shared.commit()
        except BaseException as exc:
            self._outcome.set_exception(exc)
            self._outcome.exception()  # retrieved: a batch nobody waits for is not an "unhandled" error
        else:
            self._outcome.set_result(None)

    async def ended(self) -> None:
        """Until the batch committed (raises ``BatchLost`` or the commit's error otherwise)."""
        await asyncio.shield(self._outcome)

    async def run(self, member: Member, owner: Any, open_shared: Callable[[], Shared],
                  work: Callable[[Any], Awaitable[T]], alone: Callable[[Callable[[Any], Awaitable[T]]], Awaitable[T]]
                  ) -> T:
        """``owner``'s ``unit.run(work)`` for ``member``; ``alone`` runs ``work`` on a transaction of its own."""
        _current.set(None)  # a later unit of work of this handler runs on its own (after this one committed)
        if member.done or (self.shared is not None and self.shared.owner is not owner):
            self.finish(member)  # another service's unit of work (or no batch left for it): not this batch's
            return await alone(work)
        async with self._lock:
            if self.shared is None:
                self.shared = open_shared()
            if self.shared.broken:
                failed: BaseException | None = BatchLost("the batch's connection was lost")
            else:
                try:
                    result = await self.shared.step(work)
                    failed = None
                except BaseException as exc:  # noqa: BLE001 (re-raised below, after this member left)
                    failed = exc
        self.finish(member)
        if failed is not None:
            if not (isinstance(failed, BatchLost) or _transient(failed)):
                raise failed  # rolled back to its savepoint: the error policy handles this message as before
            await self._settled()  # the batch's locks released: this work no longer waits on them
            return await alone(work)
        try:
            await self.ended()
        except BatchLost:  # nothing of the batch was committed: this work runs again on its own
            return await alone(work)
        return result

    async def _settled(self) -> None:
        try:
            await self.ended()
        except Exception:  # noqa: BLE001 (this member's work is not in the batch: its outcome is not its own)
            pass


def _transient(exc: BaseException) -> bool:
    from erpilot_platform.db import is_transient  # the database layer stays out of the memory twin's imports

    return is_transient(exc)


class GroupCommit:
    """The batches of one durable consumer: at most ``limit`` members each."""

    def __init__(self, limit: int):
        self.limit = limit
        self._open: Batch | None = None

    @asynccontextmanager
    async def member(self) -> AsyncIterator[Member]:
        """The current task's handler as a member of the open batch (or of a new one)."""
        batch = self._open
        if batch is None or batch.closed or batch.members >= self.limit:
            batch = self._open = Batch()
        member = batch.join()
        token = _current.set(member)
        try:
            yield member
        finally:
            _current.reset(token)
            batch.finish(member)  # a handler that refused before its work, or raised: nothing of it to commit
