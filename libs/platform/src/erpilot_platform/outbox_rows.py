"""The outbox's rows: its table, the ``Nats-Msg-Id`` each row goes out with, and the one INSERT that writes them
(``erpilot_platform.outbox`` publishes them), and how one row is published."""

from __future__ import annotations

import json
import uuid
from typing import Any

from opentelemetry import propagate
from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Delete,
    Insert,
    MetaData,
    Select,
    String,
    Table,
    all_,
    any_,
    bindparam,
    delete,
    func,
    literal,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY

from erpilot_platform.telemetry import tracer

# Stored with the row to resume the trace; the telemetry middleware writes fresh ones on publish.
_TRACE_HEADERS = {"traceparent", "tracestate", "baggage"}
# A stream whose leader died answers nothing until its new leader is elected (4-9 s on a cluster): each
# PubAck is awaited briefly and the relay retries often (a re-publish is de-duplicated by Nats-Msg-Id).
PUBLISH_TIMEOUT_SECONDS = 2.0


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


def insert_sql(table: Table, first: int = 1) -> str:
    """The INSERT of ``Outbox.add_all`` straight on asyncpg (``db.driver_connection``): the rows as four arrays,
    parameters ``$first`` to ``$first+3`` (msg_id, subject, headers and payload as JSON text), inserted in array
    order (``WITH ORDINALITY``), so the serial ids follow them (the relay publishes in id order). One statement
    text for any number of rows: asyncpg prepares it once per connection. ``first`` lets a service attach it to a
    statement of its own as a CTE (one round trip for a change and its events)."""
    a, b, c, d = (f"${n}" for n in range(first, first + 4))
    return (f"INSERT INTO {table.fullname} (msg_id, subject, headers, payload) "
            "SELECT msg_id, subject, headers, payload "
            f"FROM unnest({a}::text[], {b}::text[], {c}::json[], {d}::json[]) "
            "WITH ORDINALITY AS row(msg_id, subject, headers, payload, n) ORDER BY n")


def insert_args(rows: list[dict[str, Any]]) -> tuple[list[str], list[str], list[str], list[str]]:
    """The four arrays of ``insert_sql`` for ``rows`` (JSON as text: the codec SQLAlchemy's dialect sets on every
    connection takes text, as SQLAlchemy's JSON type sends it)."""
    return ([row["msg_id"] for row in rows], [row["subject"] for row in rows],
            [json.dumps(row["headers"]) for row in rows], [json.dumps(row["payload"]) for row in rows])


def delete_published_sql(table: Table) -> str:
    """``delete_published`` straight on asyncpg: ``$1`` the msg_ids."""
    return (f"DELETE FROM {table.fullname} WHERE id IN (SELECT id FROM {table.fullname} "
            "WHERE msg_id = ANY($1::text[]) FOR UPDATE SKIP LOCKED)")


def stream_for(subject: str) -> str | None:
    """The stream an outbox row is published to: commands (a choreography's next step, e.g. the ERP's
    ``cmd.approval.request``) or events; None for a session event, published on core NATS: it is stored once, in
    the agent's database with its seq, and readers replay from there what core NATS dropped (SPEC §11)."""
    from erpilot_contracts.subjects import COMMANDS_STREAM, EVENTS_STREAM

    if ".sessions." in subject:
        return None
    return COMMANDS_STREAM.name if ".cmd." in subject else EVENTS_STREAM.name


def delete_published(table: Table) -> Delete:
    """Delete the rows named ``:published`` (msg_ids); rows a relay pass is deleting (it publishes them again) are
    skipped, not waited for."""
    published = select(table.c.id).where(table.c.msg_id == any_(bindparam("published", type_=ARRAY(String))))
    return delete(table).where(table.c.id.in_(published.with_for_update(skip_locked=True).scalar_subquery()))


def older_rows(table: Table) -> Select:
    """The rows on the ``:subjects`` that are not ``:mine`` (msg_ids), in id order."""
    return select(table).where(
        table.c.subject == any_(bindparam("subjects", type_=ARRAY(String))),
        table.c.msg_id != all_(bindparam("mine", type_=ARRAY(String)))).order_by(table.c.id)


def is_ordered(subject: str) -> bool:
    """Session events: read in ``seq`` order from the stream, so a session's rows are stored in id order."""
    return ".sessions." in subject


async def publish_row(broker: Any, row: Any) -> None:
    """Publish one outbox row (a stored row, or the one a committing task built) and wait for its PubAck."""
    stored = row["headers"] or {}
    with tracer.start_as_current_span("outbox relay", context=propagate.extract(stored)):
        headers = {k: v for k, v in stored.items() if k not in _TRACE_HEADERS}
        headers["Nats-Msg-Id"] = row["msg_id"]
        await broker.publish(
            json.dumps(row["payload"]).encode(), row["subject"], headers=headers,
            stream=stream_for(row["subject"]), timeout=PUBLISH_TIMEOUT_SECONDS,
        )
