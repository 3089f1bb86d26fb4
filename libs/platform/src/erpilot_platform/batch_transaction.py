"""A batch's one transaction in a service's SQL unit of work (``erpilot_platform.batches``, issue 31 item 3).

The same steps as ``UnitOfWork.run``'s, spread over the batch: the rows this process published are deleted at
its BEGIN; each work gets its ``Transaction`` (its own ``rows``, ``emitted``) on the batch's connection, under a
SAVEPOINT unless it is the first; its turn is reserved before the COMMIT, while the batch still holds every
work's row locks, and the committing task publishes every work's rows after it, in the order the works ran.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_platform.batches import BatchLost
from erpilot_platform.db import is_disconnect, is_transient

if TYPE_CHECKING:
    from erpilot_platform.uow import UnitOfWork

T = TypeVar("T")


class SharedTransaction:
    def __init__(self, owner: UnitOfWork[Any]):
        self.owner = owner
        self.broken = False
        self._conn: AsyncConnection | None = None
        self._works = 0  # works the open transaction holds (0: the next one is its first, no savepoint)
        self._rows: list[dict[str, Any]] = []
        self._deletes: list[tuple[str, float]] = []
        self._emitted = False

    async def _begin(self) -> AsyncConnection:
        from erpilot_platform.uow import Transaction  # noqa: F401 (uow imports this module lazily too)

        if self._conn is None:
            self._conn = await self.owner.engine.connect()
        if not self._conn.in_transaction():
            await self._conn.begin()
            outbox = self.owner.outbox
            if outbox is not None:  # the rows this process published since its last write go with this one
                self._deletes = outbox.take_published()
                await outbox.delete_published(self._conn, self._deletes)
        return self._conn

    async def step(self, work: Callable[[Any], Awaitable[T]]) -> T:
        from erpilot_platform.uow import Transaction

        owner = self.owner
        try:
            conn = await self._begin()
            transaction = Transaction(conn, owner.outbox, owner.inbox, writable=True)
            if self._works == 0:  # the transaction's first work: a raise rolls the whole (this work's) back
                result = await self._work(owner, transaction, work)
            else:
                async with conn.begin_nested():  # SAVEPOINT: a raise rolls back to it, the others stay
                    result = await self._work(owner, transaction, work)
        except BaseException as exc:
            await self._after_failure(exc)
            raise
        self._works += 1
        self._rows.extend(transaction.rows)
        self._emitted = self._emitted or transaction.emitted
        return result

    @staticmethod
    async def _work(owner: UnitOfWork[Any], transaction: Any, work: Callable[[Any], Awaitable[T]]) -> T:
        if owner.outbox is None:
            return await work(owner.bind(transaction))
        with owner.outbox.collecting(transaction.rows):
            return await work(owner.bind(transaction))

    async def _after_failure(self, exc: BaseException) -> None:
        if is_disconnect(exc) or self._conn is not None and self._conn.invalidated:
            self.broken = True  # every work of the batch is lost with the connection
            if not isinstance(exc, DBAPIError) and self._conn is not None and not self._conn.invalidated:
                # Lost under a statement run straight on asyncpg (``db.driver_connection``): SQLAlchemy did not
                # see it, and the pool must not take the dead connection back.
                await self._conn.invalidate()
            return
        if self._works == 0 and self._conn is not None and self._conn.in_transaction():
            await self._conn.rollback()  # only the failed first work was in it (and the deletes: given back)
            self._give_back()

    def _give_back(self) -> None:
        if self.owner.outbox is not None:
            self.owner.outbox.give_back(self._deletes)
        self._deletes = []

    async def commit(self) -> None:
        owner, conn = self.owner, self._conn
        if conn is None:
            return
        try:
            if not conn.in_transaction():  # every work failed: nothing to commit
                return
            turn = owner.outbox.reserve_turn() if self._rows and owner.outbox is not None else None
            try:
                await conn.commit()
            except BaseException as exc:
                self._give_back()
                if turn is not None:
                    turn.end()
                if self._rows and is_transient(exc):
                    owner.wake()  # lost during the commit: committed or not, the relay looks
                if isinstance(exc, DBAPIError) and not is_disconnect(exc):
                    raise BatchLost(f"the batch's commit was refused: {exc}") from exc  # rolled back: run again
                raise
        finally:
            await conn.close()
        if turn is not None and owner.outbox is not None:
            await owner.outbox.publish_committed(self._rows, turn)
        elif self._emitted:
            owner.wake()

    async def abort(self) -> None:
        self._give_back()
        if self._conn is not None:
            try:
                await self._conn.close()
            except Exception:  # noqa: BLE001 (the connection is gone already)
                pass
