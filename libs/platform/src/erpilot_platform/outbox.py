"""Transactional outbox: events are rows written in the same transaction as the state change, published to
JetStream by the task that committed that transaction, right after its commit (issue 31: no relay transaction
per business transaction). ``Nats-Msg-Id`` is the row's ``msg_id``, so a re-publish is de-duplicated by the stream.
Session events alone go out on core NATS (``outbox_rows.stream_for``): their store is the agent's database, which
readers replay from (SPEC §11).

A published row is deleted later, without a transaction of its own: the next unit of work of the same process
deletes every row it published (``delete_published``, one statement of that transaction); what no unit of work
took within ``DELETE_AFTER_SECONDS`` (an idle service's last rows) is deleted in one transaction for all of them
(``delete_published_pass``). So a busy service spends no transaction on its outbox, and an idle one's outbox is
empty a second after its last write.

Order: each transaction's rows go out in id order, and the publishes of a process take turns in the order the
transactions reserved them, before their commits (``erpilot_platform.turns``): a session's events go out in
``seq`` order. The relay's pass takes a turn too, so no commit overtakes older rows the relay is to publish.
Across replicas nothing orders two publishes, as nothing orders two commits: session events go out on core NATS
and the gateway releases a session's events in ``seq`` order whatever order they arrive in, reading what is
missing from the agent's store (``erpilot_gateway.session_watch``).

The relay (``run``) publishes what no committing task did, in id order, under a transaction-scoped advisory lock
(one relay per service at a time), deleting the rows in the same transaction: at start-up (rows a crash between
commit and publish left, or published rows a crash left undeleted), after a failed publish (the broker away, the
task cancelled), and at a read-only look every ``SAFETY_POLL_SECONDS`` for rows older than
``STALE_AFTER_SECONDS`` (a replica that crashed and never came back). Rows a committing task is publishing, or
has published and not yet deleted, may be published a second time by another replica's relay (a start-up pass
takes every row): the stream drops the copy by its ``Nats-Msg-Id``.

Why a re-publish is harmless and bounded. JetStream de-duplicates only within a stream's duplicate window
(2 minutes by default), so a row may be delivered twice when its re-publish comes later than that. It can only
come from a relay pass, which deletes what it publishes in the same transaction: a row goes out again at most
once per relay pass that finds it, and a pass finds a published row only if the process that published it died
before deleting it (a live process deletes its published rows within ``DELETE_AFTER_SECONDS``, long before
another replica's safety look counts them stale at ``STALE_AFTER_SECONDS``). That pass is the restarted
replica's start-up (seconds later, inside the window) or another replica's safety look 60 to 90 seconds after the
commit (inside the window too); only a replica that stays down longer than the window and then restarts
publishes a row a second time past it, once. Every consumer handles a message once whatever JetStream delivers
(the inbox claim, row locks, single-use grants; a session event by its ``seq``), so that copy changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from opentelemetry import propagate
from pydantic import BaseModel
from sqlalchemy import Insert, Table, delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_platform import outbox_rows
from erpilot_platform.db import driver_connection
from erpilot_platform.failpoints import failpoint
from erpilot_platform.loops import Soon, every, looking_later
from erpilot_platform.outbox_rows import insert_rows, name_of, outbox_table, published_msg_id
from erpilot_platform.turns import Turn, Turns

__all__ = ["Outbox", "insert_rows", "name_of", "outbox_table", "published_msg_id"]  # the rows' helpers, as before
log = logging.getLogger(__name__)
# A stream whose leader died answers nothing until its new leader is elected (4-9 s on a cluster): the relay
# retries often (``outbox_rows.PUBLISH_TIMEOUT_SECONDS``: each PubAck is awaited briefly).
RETRY_SECONDS = 0.2
# Only for rows no committing task published: a replica that crashed right after its commit and never came back
# (one that restarts publishes them at start-up). Each look is a read-only query per relay (issue 13).
SAFETY_POLL_SECONDS = 30.0
# Published rows no unit of work deleted within this time are deleted in one transaction (an idle service's).
DELETE_AFTER_SECONDS = 1.0
# The safety look leaves younger rows alone: they may be a live replica's, published and to be deleted by its next
# unit of work or within DELETE_AFTER_SECONDS, with ample room for a slow database. Still inside JetStream's
# 2-minute duplicate window, so what the look publishes again is dropped by the stream.
STALE_AFTER_SECONDS = 2 * SAFETY_POLL_SECONDS
RELAY_BATCH = 200
# The rows the current unit of work's inserts build (``Outbox.collecting``): its task publishes them after the commit.
_written: ContextVar[list[dict[str, Any]] | None] = ContextVar("outbox rows written", default=None)


class Outbox:
    """Write side (``add``, inside the caller's transaction), publishing after the commit (``publish_committed``)
    and the relay (``run``) of one outbox."""

    def __init__(self, table: Table, *, lock_key: int):
        self.table = table
        self.lock_key = lock_key
        self._wakeup = asyncio.Event()
        # Set with the relay's wake-up (``watch``); weak, so a stopped loop's event goes with it.
        self._watchers: weakref.WeakSet[asyncio.Event] = weakref.WeakSet()
        self._publish_now = False  # rows no committing task published may wait (start-up, a failed publish)
        self.contended = False  # the last publish_pending found another relay holding the lock
        self._broker: Any = None  # set by ``run``: until the relay runs, committed rows wait for it
        self._turns = Turns()  # committing tasks and relay passes publish one after another, in reserved order
        # (msg_id, when) of the rows this process published and no transaction deleted yet, in order.
        self._published: list[tuple[str, float]] = []
        # msg_id -> when of the rows a relay pass published lately: a commit whose turn came after that pass (its
        # rows were committed before the pass looked) does not publish them a second time.
        self._relayed: dict[str, float] = {}
        self._deletes_due = asyncio.Event()  # rows were published: delete them if no unit of work does
        # Hot statements, straight on asyncpg inside the caller's transaction (issue 31 item 4).
        self._insert_sql = outbox_rows.insert_sql(table)
        self._delete_published_sql = outbox_rows.delete_published_sql(table)

    async def add(
        self, conn: AsyncConnection, subject: str, payload: BaseModel | dict[str, Any],
        *, msg_id: str | None = None, headers: dict[str, str] | None = None,
    ) -> None:
        """Record an event to publish once the surrounding transaction commits."""
        await self.add_all(conn, [(subject, payload, msg_id)], headers=headers)

    async def add_all(
        self, conn: AsyncConnection, items: list[tuple[str, BaseModel | dict[str, Any], str | None]],
        *, headers: dict[str, str] | None = None,
    ) -> None:
        """Record several events (subject, payload, msg_id or None) in one statement, in this order."""
        rows = self.rows(items, headers=headers)
        await (await driver_connection(conn)).execute(self._insert_sql, *outbox_rows.insert_args(rows))

    def insert(
        self, items: list[tuple[str, BaseModel | dict[str, Any], str | None]], *, headers: dict[str, str] | None = None,
    ) -> Insert:
        """The one multi-row INSERT of ``add_all``: run it in the unit of work that built it (its task publishes
        the rows after the commit), or attach other writes of the transaction to it as CTEs (one round trip for
        the state change and its events)."""
        return insert_rows(self.table, self.rows(items, headers=headers))

    def rows(
        self, items: list[tuple[str, BaseModel | dict[str, Any], str | None]], *, headers: dict[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """The rows of ``items``, counted as written by the current unit of work (its task publishes them after
        the commit): write them in that unit of work."""
        headers = dict(headers or {})
        propagate.inject(headers)  # the trace continues from the publish, not from nowhere
        rows = [{"msg_id": published_msg_id(msg_id), "subject": subject, "headers": headers,
                 "payload": payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload}
                for subject, payload, msg_id in items]
        if (written := _written.get()) is not None:
            written.extend(rows)
        return rows

    @contextmanager
    def collecting(self, rows: list[dict[str, Any]]) -> Iterator[None]:
        """Gather in ``rows`` every row this task's ``insert`` builds inside the block (one unit of work's)."""
        token = _written.set(rows)
        try:
            yield
        finally:
            _written.reset(token)

    def reserve_turn(self) -> Turn:
        """The turn a transaction about to commit will publish its rows in (reserved before its commit)."""
        return self._turns.reserve()

    async def publish_committed(self, rows: list[dict[str, Any]], turn: Turn) -> None:
        """Publish the rows of a transaction of this process that has just committed, from the task that committed
        it (no relay transaction), in its ``turn``. Never raises for a failed publish: the relay publishes them."""
        self._notify_watchers()
        try:
            await turn.wait()
            if self._broker is None or self._publish_now:
                self.wake()  # no relay running yet, or it has older rows to send first: it sends these after them
                return
            failpoint("outbox.before_publish")  # committed, not published: the relay's start-up pass publishes them
            rows = [row for row in rows if self._relayed.pop(row["msg_id"], None) is None]
            for row in rows:
                await outbox_rows.publish_row(self._broker, row)
            published_at = time.monotonic()
            self._published.extend((row["msg_id"], published_at) for row in rows)
            self._deletes_due.set()
        except Exception:
            log.warning("publishing %d committed outbox rows failed: the relay publishes them", len(rows),
                        exc_info=True)
            self.wake()
            return
        except BaseException:  # cancelled mid-way: the relay publishes what this task could not
            self.wake()
            raise
        finally:
            turn.end()
        failpoint("outbox.after_publish")  # published, not deleted: a relay pass publishes them again

    def publish_with(self, broker: Any) -> None:
        """From now on committing tasks publish their rows themselves, to ``broker`` (``run`` calls it)."""
        self._broker = broker

    def take_published(self, *, before: float | None = None) -> list[tuple[str, float]]:
        """The rows this process published (before ``before``, a ``time.monotonic()``) and nothing deleted yet;
        the caller deletes them (``delete_published``) or, if its transaction rolls back, gives them back."""
        if before is None:
            taken, self._published = self._published, []
            return taken
        taken = [row for row in self._published if row[1] <= before]
        self._published = [row for row in self._published if row[1] > before]
        return taken

    def give_back(self, published: list[tuple[str, float]]) -> None:
        """Published rows a rolled-back transaction did not delete: a later one deletes them."""
        self._published[:0] = published

    async def delete_published(self, conn: AsyncConnection, published: list[tuple[str, float]]) -> None:
        """Delete published rows in the caller's transaction (one statement; none if there are none)."""
        if published:
            await (await driver_connection(conn)).execute(self._delete_published_sql,
                                                          [msg_id for msg_id, _ in published])

    def wake(self) -> None:
        """Tell the relay of this process that rows wait that no committing task published."""
        self._publish_now = True
        self._wakeup.set()
        self._notify_watchers()

    def _notify_watchers(self) -> None:
        for watcher in self._watchers:
            watcher.set()

    def watch(self) -> asyncio.Event:
        """An event set whenever a commit of this process wrote events (or the relay is woken). A loop that
        looks at the rows those commits change waits on it instead of polling (the agent's reconciler)."""
        self._watchers.add(event := asyncio.Event())
        return event

    async def publish_pending(self, engine: AsyncEngine, broker: Any, *, batch: int = RELAY_BATCH) -> int:
        """The relay's pass: publish one batch in id order; returns how many rows were published.

        The batch is deleted first (``DELETE … RETURNING``, one round trip) and published inside the same
        transaction: a failed publish or a crash rolls the delete back, and the rows are published again
        (de-duplicated by ``Nats-Msg-Id``). Rows a unit of work is deleting are published already: skipped; so
        are rows this process published and has not deleted yet (its start-up pass may meet a commit's publish):
        the pass deletes them without a second publish."""
        async with engine.begin() as conn:
            got_lock = await conn.scalar(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": self.lock_key})
            self.contended = not got_lock
            if not got_lock:
                return 0
            oldest = (select(self.table.c.id).order_by(self.table.c.id).limit(batch)
                      .with_for_update(skip_locked=True).scalar_subquery())
            rows = sorted((await conn.execute(
                delete(self.table).where(self.table.c.id.in_(oldest)).returning(*self.table.c)
            )).mappings().all(), key=lambda row: row["id"])  # RETURNING has no order
            mine = {msg_id for msg_id, _ in self._published}
            for row in rows:
                if row["msg_id"] not in mine:
                    await outbox_rows.publish_row(broker, row)
        now, deleted = time.monotonic(), {row["msg_id"] for row in rows}
        self._published = [row for row in self._published if row[0] not in deleted]
        self._relayed = {msg_id: at for msg_id, at in self._relayed.items() if at > now - STALE_AFTER_SECONDS}
        self._relayed.update((msg_id, now) for msg_id in deleted - mine)
        return len(rows)

    async def has_pending(self, engine: AsyncEngine) -> bool:
        """A read-only look (no lock, no transaction: one round trip): is a row waiting that no live replica
        will publish or delete, one older than ``STALE_AFTER_SECONDS``?"""
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            stale = self.table.c.created_at < func.now() - timedelta(seconds=STALE_AFTER_SECONDS)
            return (await conn.scalar(select(self.table.c.id).where(stale).limit(1))) is not None

    async def run(self, engine: AsyncEngine, broker: Any, *, poll_interval: float = SAFETY_POLL_SECONDS) -> None:
        """Relay forever: publish what is pending, then wait for a wake-up or the safety poll."""
        self.publish_with(broker)
        self._publish_now = True  # start-up: publish what a crash left behind
        # Broker or database away: the rows stay; try again shortly (not growing: a stream's leader
        # election takes seconds and the events should follow it at once).
        await asyncio.gather(
            every(poll_interval, lambda: self.relay_once(engine, broker), wake=self._wakeup,
                  name="outbox relay", retry_after=RETRY_SECONDS, max_retry_after=RETRY_SECONDS),
            # Woken by a publish, it looks DELETE_AFTER_SECONDS later (once per that while publishes go on).
            every(poll_interval, lambda: self.delete_published_pass(engine), wake=self._deletes_due,
                  name="outbox deletes", wait=looking_later(DELETE_AFTER_SECONDS)),
        )

    async def relay_once(self, engine: AsyncEngine, broker: Any) -> Soon | None:
        """One pass: publish everything pending if told to (or the safety look finds stale rows), in a turn of
        its own: the commits before it publish first, those after it wait for it (or leave their rows to it)."""
        turn = self._turns.reserve()
        try:
            await turn.wait()
            publish_now, self._publish_now = self._publish_now, False
            if publish_now or await self.has_pending(engine):
                # A short batch was all there was: rows committed since are published by their own tasks.
                while await self.publish_pending(engine, broker) == RELAY_BATCH:
                    pass
                if self.contended:
                    self._publish_now = True  # a retry publishes at once
                    return Soon(RETRY_SECONDS)  # the other relay may have looked before our commit
        except Exception:
            self._publish_now = True  # so does the retry after a failure
            raise
        finally:
            turn.end()
        return None

    async def delete_published_pass(self, engine: AsyncEngine, *, after: float = DELETE_AFTER_SECONDS) -> Soon | None:
        """Delete, in one transaction, the rows this process published ``after`` seconds ago or more that no unit
        of work deleted; then look again when the next published row is due."""
        due = time.monotonic() - after
        taken = self.take_published(before=due)
        try:
            if taken:
                async with engine.begin() as conn:
                    await self.delete_published(conn, taken)
        except BaseException:
            self.give_back(taken)
            raise
        return Soon(max(0.0, self._published[0][1] - due)) if self._published else None

