"""The one unit of work every service uses (issue 27): ``run`` a change, ``read`` what is committed, ``wake`` the relay.

A unit of work is one database transaction over a service's repositories, its outbox (``emit``: events and
commands its own task publishes right after the commit; the rows it published are deleted by its next unit of
work, see ``erpilot_platform.outbox``) and, where the service has one, its inbox (``claim`` / ``record``: the
answer of a handled command, stored with its effects). ``run(work)`` commits when ``work`` returns and rolls
back when it raises; a serialization failure, a deadlock or a connection lost before the commit runs ``work``
again on a fresh transaction (``db.run_in_transaction``), so ``work`` must not act outside its unit of work
(no message sent, no failpoint that could fire twice by mistake). ``read(work)`` runs ``work`` on what is
committed, with no transaction: each statement sees its own snapshot (as READ COMMITTED statements do anyway),
nothing is locked, nothing can be emitted; it saves the BEGIN and ROLLBACK round trips.

A service gives the unit of work a ``bind``: a function from the platform's ``Transaction`` (the connection,
``emit``, ``now``, the inbox) to the service's own view of it, its ``Work``: the same ``Transaction`` plus the
repositories bound to that connection. Use cases are written against the service's ``Work`` protocol; the SQL
``UnitOfWork`` here and ``erpilot_platform.testing.memory_uow.MemoryUnitOfWork`` both implement it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_platform import batches
from erpilot_platform.batch_transaction import SharedTransaction
from erpilot_platform.db import driver_connection, is_transient, run_in_transaction
from erpilot_platform.inbox import Inbox
from erpilot_platform.outbox import Outbox
from erpilot_platform.turns import Turn

T = TypeVar("T")
W = TypeVar("W", covariant=True)


class ReadOnly(RuntimeError):
    """A ``read`` unit of work tried to change something: each statement would commit on its own."""


class Transaction:
    """What every unit of work offers beside a service's repositories (the platform's half of a ``Work``)."""

    def __init__(self, conn: AsyncConnection, outbox: Outbox | None, inbox: Inbox | None, *, writable: bool):
        self.conn = conn
        self.outbox = outbox
        self.inbox = inbox
        self.writable = writable
        self.emitted = False  # the relay is woken after the commit only when this transaction added rows
        self.rows: list[dict[str, Any]] = []  # the outbox rows it wrote: its task publishes them after the commit
        self.deletes: list[tuple[str, float]] = []  # the published rows it deletes: given back if it rolls back
        self.turn: Turn | None = None  # reserved before its commit: its rows go out in commit order

    def require_writable(self) -> None:
        if not self.writable:
            raise ReadOnly("a read-only unit of work changes nothing")

    async def emit(self, subject: str, payload: BaseModel | dict[str, Any], msg_id: str | None = None) -> None:
        """Publish ``payload`` on ``subject`` once this unit of work commits (the outbox). ``msg_id`` names the
        message: its ``Nats-Msg-Id`` starts with it and ends with a random part (``outbox.published_msg_id``)."""
        self.require_writable()
        if self.outbox is None:
            raise RuntimeError("this unit of work has no outbox")
        await self.outbox.add(self.conn, subject, payload, msg_id=msg_id)
        self.emitted = True

    def wrote_outbox(self) -> None:
        """A repository wrote outbox rows itself (in one statement with its own change): wake the relay after the
        commit as ``emit`` would."""
        self.require_writable()
        self.emitted = True

    async def now(self) -> datetime:
        """The database's clock at this call (not the transaction's start): every replica shares it, and a use
        case that reads it after taking its row locks counts a wait for a lock against a deadline."""
        return await (await driver_connection(self.conn)).fetchval("SELECT clock_timestamp()")

    async def claim(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        """Claim an inbox key: ``(True, None)`` the first time, ``(False, recorded answer)`` once handled."""
        self.require_writable()
        return await self._inbox().claim(self.conn, key)

    async def record(self, key: str, response: dict[str, Any]) -> None:
        """Store the answer under a key claimed in this unit of work."""
        self.require_writable()
        await self._inbox().record(self.conn, key, response)

    def _inbox(self) -> Inbox:
        if self.inbox is None:
            raise RuntimeError("this unit of work has no inbox")
        return self.inbox


class UnitOfWorkPort(Protocol[W]):
    """What the service layer sees of a unit of work: ``W`` is the service's ``Work`` (repositories + emit)."""

    async def run(self, work: Callable[[W], Awaitable[T]]) -> T:
        """Run ``work`` in one transaction: committed when it returns, rolled back when it raises."""
        ...

    async def read(self, work: Callable[[W], Awaitable[T]]) -> T:
        """Run ``work`` on what is committed: no transaction, no lock, nothing emitted."""
        ...

    def wake(self) -> None:
        """Tell the outbox relay that rows were committed (``run`` does it by itself after an ``emit``)."""
        ...


class UnitOfWork(Generic[W]):
    """The SQL unit of work of one service: its engine, its outbox (and inbox), and its ``bind``."""

    def __init__(self, engine: AsyncEngine, bind: Callable[[Transaction], W], *, outbox: Outbox | None = None,
                 inbox: Inbox | None = None):
        self.engine = engine
        self.bind = bind
        self.outbox = outbox
        self.inbox = inbox
        # The same pool; each statement on it is a transaction of its own (no BEGIN, no ROLLBACK).
        self.autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def run(self, work: Callable[[W], Awaitable[T]]) -> T:
        if (member := batches.current()) is not None:  # a batched consumer's message: a step of its batch's
            # transaction, returning once the batch committed (erpilot_platform.batches, issue 31 item 3)
            return await member.batch.run(member, self, lambda: SharedTransaction(self), work, self.run)
        transactions: list[Transaction] = []

        async def attempt(conn: AsyncConnection) -> T:
            transaction = Transaction(conn, self.outbox, self.inbox, writable=True)
            transactions.append(transaction)
            if self.outbox is None:
                return await work(self.bind(transaction))
            # The rows this process published since its last write go with this transaction (issue 31).
            transaction.deletes = self.outbox.take_published()
            await self.outbox.delete_published(conn, transaction.deletes)
            with self.outbox.collecting(transaction.rows):
                result = await work(self.bind(transaction))
            if transaction.rows:  # still under its row locks: a later transaction on them publishes after it
                transaction.turn = self.outbox.reserve_turn()
            return result

        try:
            result = await run_in_transaction(self.engine, attempt)
        except BaseException as exc:
            self._rolled_back(transactions)
            if transactions and transactions[-1].rows and is_transient(exc):
                self.wake()  # a connection lost during the commit: committed or not, the relay looks
            raise
        self._rolled_back(transactions[:-1])
        if transactions[-1].turn is not None and self.outbox is not None:
            await self.outbox.publish_committed(transactions[-1].rows, transactions[-1].turn)
        elif transactions[-1].emitted:
            self.wake()
        return result

    def _rolled_back(self, transactions: list[Transaction]) -> None:
        """The published rows these transactions were to delete: a later one deletes them; their turns end."""
        for transaction in reversed(transactions):
            if self.outbox is not None:
                self.outbox.give_back(transaction.deletes)
            if transaction.turn is not None:
                transaction.turn.end()

    async def read(self, work: Callable[[W], Awaitable[T]]) -> T:
        async with self.autocommit.connect() as conn:
            return await work(self.bind(Transaction(conn, self.outbox, self.inbox, writable=False)))

    def wake(self) -> None:
        if self.outbox is not None:
            self.outbox.wake()
