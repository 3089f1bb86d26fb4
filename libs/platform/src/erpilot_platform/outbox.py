"""Transactional outbox: events are rows written in the same transaction as the state change,
then published to JetStream by a relay. ``Nats-Msg-Id`` is the row's ``msg_id``, so a re-publish
after a crash between publish and delete is de-duplicated by the stream. Session events alone go out on
core NATS (``_stream_for``): their store is the agent's database, which readers replay from.

Only one relay per service publishes at a time (a transaction-scoped advisory lock), in id order,
which keeps per-session events in ``seq`` order.

The relay is woken in-process after each commit that added rows (``wake``); it publishes at start-up
(rows a crash left behind) and otherwise only looks every ``SAFETY_POLL_SECONDS`` with a read-only
check (rows of a replica that crashed right after its commit, or a writer that forgot to wake it).
When another replica's relay holds the lock, it retries shortly: that relay may have looked before
this replica's commit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
import weakref
from typing import Any

from opentelemetry import propagate
from pydantic import BaseModel
from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Insert,
    MetaData,
    String,
    Table,
    delete,
    func,
    literal,
    select,
    text,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_platform.failpoints import failpoint
from erpilot_platform.loops import Soon, every
from erpilot_platform.telemetry import tracer

log = logging.getLogger(__name__)
# Stored with the row to resume the trace; the telemetry middleware writes fresh ones on publish.
_TRACE_HEADERS = {"traceparent", "tracestate", "baggage"}
# A stream whose leader died answers nothing until its new leader is elected (4-9 s on a cluster): the
# relay retries often and waits briefly for each PubAck (a re-publish is de-duplicated by Nats-Msg-Id).
PUBLISH_TIMEOUT_SECONDS = 2.0
RETRY_SECONDS = 0.2
# Only for rows no wake-up announced: a replica that crashed right after its commit and never came back
# (one that restarts publishes them at start-up). Each look is a read-only query per relay (issue 13).
SAFETY_POLL_SECONDS = 30.0
RELAY_BATCH = 200


def outbox_table(metadata: MetaData) -> Table:
    """The ``outbox`` table in the service's schema (bind it to the service's MetaData)."""
    return Table(
        "outbox", metadata,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("msg_id", String(200), nullable=False, unique=True),
        Column("subject", String(300), nullable=False),
        Column("payload", JSON, nullable=False),
        Column("headers", JSON, nullable=False, default=dict),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    )


def published_msg_id(name: str | None) -> str:
    """The ``Nats-Msg-Id`` a row goes out with: its name (if any), then a random part.

    Never predictable: JetStream drops a second message with an id within a stream's duplicate window whatever
    its subject, so an id another publisher on the stream can foresee (``erp.commit.<operation_id>``) lets it
    publish a harmless message under that id first and have ours dropped (the agent, which publishes on the
    command and event streams, could so suppress an approved commit). The random part is stored with the row,
    so a re-publish of the same row (a relay that died before its commit) still carries the same id and is
    dropped; that a message is handled once is the consumers' work (row locks, answer stores, single-use
    grants), not the id's. The name stays in front for whoever reads the stream."""
    random_part = uuid.uuid4().hex
    return f"{name}.{random_part}" if name else random_part


def name_of(msg_id: str) -> str | None:
    """The name a ``published_msg_id`` was made from (None: it had none)."""
    return msg_id.rpartition(".")[0] or None


class Outbox:
    """Write side (``add``, inside the caller's transaction) and relay side (``run``) of one outbox."""

    def __init__(self, table: Table, *, lock_key: int):
        self.table = table
        self.lock_key = lock_key
        self._wakeup = asyncio.Event()
        # Set with the relay's wake-up (``watch``); weak, so a stopped loop's event goes with it.
        self._watchers: weakref.WeakSet[asyncio.Event] = weakref.WeakSet()
        self._publish_now = False  # rows were committed (or a pass failed) since the relay last looked
        self.contended = False  # the last publish_pending found another relay holding the lock

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
        await conn.execute(self.insert(items, headers=headers))

    def insert(
        self, items: list[tuple[str, BaseModel | dict[str, Any], str | None]], *, headers: dict[str, str] | None = None,
    ) -> Insert:
        """The one multi-row INSERT of ``add_all``: run it, or attach other writes of the transaction to it
        as CTEs (one round trip for the state change and its events)."""
        headers = dict(headers or {})
        propagate.inject(headers)  # the trace continues from the relay's publish, not from nowhere
        return insert_rows(self.table, [
            {"msg_id": published_msg_id(msg_id), "subject": subject, "headers": headers,
             "payload": payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload}
            for subject, payload, msg_id in items])

    def wake(self) -> None:
        """Tell the relay of this process that new rows were committed (saves a poll interval)."""
        self._publish_now = True
        self._wakeup.set()
        for watcher in self._watchers:
            watcher.set()

    def watch(self) -> asyncio.Event:
        """An event set whenever the relay is woken: a commit of this process wrote events. A loop that
        looks at the rows those commits change waits on it instead of polling (the agent's reconciler)."""
        self._watchers.add(event := asyncio.Event())
        return event

    async def publish_pending(self, engine: AsyncEngine, broker: Any, *, batch: int = RELAY_BATCH) -> int:
        """Publish one batch in id order; returns how many rows were published.

        The batch is deleted first (``DELETE … RETURNING``, one round trip) and published inside the same
        transaction: a failed publish or a crash rolls the delete back, and the rows are published again
        (de-duplicated by ``Nats-Msg-Id``)."""
        async with engine.begin() as conn:
            got_lock = await conn.scalar(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": self.lock_key})
            self.contended = not got_lock
            if not got_lock:
                return 0
            oldest = select(self.table.c.id).order_by(self.table.c.id).limit(batch).scalar_subquery()
            rows = sorted((await conn.execute(
                delete(self.table).where(self.table.c.id.in_(oldest)).returning(*self.table.c)
            )).mappings().all(), key=lambda row: row["id"])  # RETURNING has no order
            for row in rows:
                stored = row["headers"] or {}
                with tracer.start_as_current_span("outbox relay", context=propagate.extract(stored)):
                    headers = {k: v for k, v in stored.items() if k not in _TRACE_HEADERS}
                    headers["Nats-Msg-Id"] = row["msg_id"]
                    await broker.publish(
                        json.dumps(row["payload"]).encode(), row["subject"], headers=headers,
                        stream=_stream_for(row["subject"]), timeout=PUBLISH_TIMEOUT_SECONDS,
                    )
                failpoint("outbox.after_publish")
            if rows:
                failpoint("outbox.before_commit")  # the batch is published and deleted, not committed
            return len(rows)

    async def has_pending(self, engine: AsyncEngine) -> bool:
        """A read-only look (no lock, no transaction: one round trip): is any row waiting?"""
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            return (await conn.scalar(select(self.table.c.id).limit(1))) is not None

    async def run(self, engine: AsyncEngine, broker: Any, *, poll_interval: float = SAFETY_POLL_SECONDS) -> None:
        """Relay forever: publish what is pending, then wait for a wake-up or the safety poll."""
        self._publish_now = True  # start-up: publish what a crash left behind
        # Broker or database away: the rows stay; try again shortly (not growing: a stream's leader
        # election takes seconds and the events should follow it at once).
        await every(poll_interval, lambda: self.relay_once(engine, broker), wake=self._wakeup,
                    name="outbox relay", retry_after=RETRY_SECONDS, max_retry_after=RETRY_SECONDS)

    async def relay_once(self, engine: AsyncEngine, broker: Any) -> Soon | None:
        """One pass: publish everything pending if told to (or the read-only look finds rows)."""
        publish_now, self._publish_now = self._publish_now, False
        try:
            if publish_now or await self.has_pending(engine):
                # A short batch was all there was: a commit after the look wakes us again (every() cleared
                # the wake-up before this pass), so no empty pass (a transaction) to make sure.
                while await self.publish_pending(engine, broker) == RELAY_BATCH:
                    pass
                if self.contended:
                    self._publish_now = True  # a retry publishes at once
                    return Soon(RETRY_SECONDS)  # the other relay may have looked before our commit
        except Exception:
            self._publish_now = True  # so does the retry after a failure
            raise
        return None


def insert_rows(table: Table, rows: list[dict[str, Any]]) -> Insert:
    """One INSERT of ``rows`` (all with the same keys), in this order, as a statement SQLAlchemy compiles
    once per number of rows and caches: hot writes are not compiled again on every execution.

    A multi-row ``VALUES`` would be compiled on every execution, with any statement it is a CTE of
    (SQLAlchemy 2 marks it uncacheable: sqlalchemy/sql/cache_key.py ``visit_dml_multi_values``). Several
    rows are an ``INSERT … SELECT … UNION ALL SELECT …`` instead: PostgreSQL produces the rows of a
    ``UNION ALL`` in order, as it does those of a ``VALUES`` list, so the serial ids still follow ``rows``
    (the relay publishes in id order)."""
    if len(rows) == 1:
        return table.insert().values(rows[0])
    names = list(rows[0])
    return table.insert().from_select(names, union_all(*(
        select(*(literal(row[name], table.c[name].type) for name in names)) for row in rows)))


def _stream_for(subject: str) -> str | None:
    """The stream an outbox row is published to: commands (a choreography's next step, e.g. the ERP's
    ``cmd.approval.request``) or events; None for a session event, published on core NATS: it is stored once, in
    the agent's database with its seq, and readers replay from there what core NATS dropped (SPEC §11)."""
    from erpilot_contracts.subjects import COMMANDS_STREAM, EVENTS_STREAM

    if ".sessions." in subject:
        return None
    return COMMANDS_STREAM.name if ".cmd." in subject else EVENTS_STREAM.name
