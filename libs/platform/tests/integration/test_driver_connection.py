"""Issue 31 item 4: hot statements run straight on the asyncpg connection a unit of work's SQLAlchemy connection
holds (``db.driver_connection``), inside that unit of work's transaction, and their errors (asyncpg's own, not
wrapped) are read as SQLAlchemy's are: retried, transient, a lost connection invalidated."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy import func, select

from erpilot_platform.db import (
    driver_connection,
    is_disconnect,
    is_transient,
    is_unique_violation,
    run_in_transaction,
)
from erpilot_platform.uow import UnitOfWork

pytestmark = pytest.mark.integration


class Boom(RuntimeError):
    pass


def _uow(engine) -> UnitOfWork:
    return UnitOfWork(engine, lambda tx: tx)


async def _count(engine, table) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(table))


def _insert(table) -> str:
    return (f"INSERT INTO {table.schema}.outbox (msg_id, subject, payload, headers) "
            "VALUES ($1, 's', $2, '{}')")


async def _terminate(engine, raw: asyncpg.Connection) -> None:
    """The server ends ``raw``'s backend, as a restart or a failover would (and waits until it is gone)."""
    async with engine.connect() as other:
        await other.execute(select(func.pg_terminate_backend(raw.get_server_pid(), 5000)))


async def test_a_raw_write_first_in_a_unit_of_work_that_raises_is_rolled_back(outbox_rows_table):
    """The adapter begins lazily: without ``driver_connection`` beginning both transactions, this INSERT (the
    unit of work's first statement) would commit on its own."""
    engine, table = outbox_rows_table

    async def work(tx) -> None:
        raw = await driver_connection(tx.conn)
        await raw.execute(_insert(table), "rolled-back", '{"a": 1}')
        assert await raw.fetchval(f"SELECT count(*) FROM {table.schema}.outbox") == 1  # seen inside
        raise Boom()

    with pytest.raises(Boom):
        await _uow(engine).run(work)
    assert await _count(engine, table) == 0


async def test_a_raw_write_first_in_a_unit_of_work_that_returns_is_committed(outbox_rows_table):
    """And ``conn.commit()`` commits it: SQLAlchemy's own transaction was begun too."""
    engine, table = outbox_rows_table

    async def work(tx) -> str:
        raw = await driver_connection(tx.conn)
        await raw.execute(_insert(table), "committed", '{"a": 1}')
        return await raw.fetchval(f"SELECT payload FROM {table.schema}.outbox")

    assert await _uow(engine).run(work) == {"a": 1}  # JSON as text in, parsed out (SQLAlchemy's codecs)
    assert await _count(engine, table) == 1


async def test_raw_and_sqlalchemy_statements_share_one_transaction(outbox_rows_table):
    engine, table = outbox_rows_table

    async def work(tx) -> None:
        await tx.conn.execute(table.insert().values(msg_id="orm", subject="s", payload={}, headers={}))
        raw = await driver_connection(tx.conn)
        await raw.execute(_insert(table), "raw", "{}")
        assert await tx.conn.scalar(select(func.count()).select_from(table)) == 2
        raise Boom()

    with pytest.raises(Boom):
        await _uow(engine).run(work)
    assert await _count(engine, table) == 0


async def test_a_read_unit_of_work_runs_raw_statements_on_its_autocommit_connection(outbox_rows_table):
    engine, table = outbox_rows_table
    await _uow(engine).run(lambda tx: tx.conn.execute(
        table.insert().values(msg_id="m", subject="s", payload={"x": 2}, headers={})))

    async def read(tx) -> object:
        raw = await driver_connection(tx.conn)
        assert not raw.is_in_transaction()  # no BEGIN, no ROLLBACK round trips on a read
        return await raw.fetchval(f"SELECT payload FROM {table.schema}.outbox WHERE msg_id = $1", "m")

    assert await _uow(engine).read(read) == {"x": 2}


async def test_a_raw_unique_violation_is_asyncpgs_own_and_not_transient(outbox_rows_table):
    engine, table = outbox_rows_table

    async def twice(tx) -> None:
        raw = await driver_connection(tx.conn)
        await raw.execute(_insert(table), "dup", "{}")
        await raw.execute(_insert(table), "dup", "{}")

    with pytest.raises(asyncpg.UniqueViolationError) as caught:
        await _uow(engine).run(twice)
    assert not is_transient(caught.value) and is_unique_violation(caught.value)
    assert await _count(engine, table) == 0


async def test_a_unique_violation_through_sqlalchemy_is_one_too(outbox_rows_table):
    engine, table = outbox_rows_table
    row = {"msg_id": "dup", "subject": "s", "payload": {}, "headers": {}}

    async def twice(tx) -> None:
        await tx.conn.execute(table.insert().values(row))
        await tx.conn.execute(table.insert().values(row))

    with pytest.raises(Exception) as caught:  # noqa: PT011 - SQLAlchemy's IntegrityError
        await _uow(engine).run(twice)
    assert is_unique_violation(caught.value) and not is_transient(caught.value)


async def test_a_raw_serialization_failure_is_retried_on_a_fresh_transaction(outbox_rows_table):
    engine, table = outbox_rows_table
    attempts = []

    async def work(tx) -> int:
        raw = await driver_connection(tx.conn)
        await raw.execute(_insert(table), f"try-{len(attempts)}", "{}")
        attempts.append(1)
        if len(attempts) == 1:  # raised by the server, as a real conflict would be
            await raw.execute("DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$")
        return len(attempts)

    assert await _uow(engine).run(work) == 2
    async with engine.connect() as conn:
        assert await conn.scalar(select(table.c.msg_id)) == "try-1"  # the first attempt's row rolled back


async def test_a_raw_deadlock_is_transient(outbox_rows_table):
    engine, _ = outbox_rows_table

    async def work(conn) -> None:
        raw = await driver_connection(conn)
        await raw.execute("DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$")

    with pytest.raises(asyncpg.DeadlockDetectedError) as caught:
        await run_in_transaction(engine, work, attempts=2)
    assert is_transient(caught.value)


async def test_a_connection_lost_under_a_raw_statement_is_retried_and_invalidated(outbox_rows_table):
    engine, table = outbox_rows_table
    seen: list[asyncpg.Connection] = []

    async def work(tx) -> int:
        raw = await driver_connection(tx.conn)
        seen.append(raw)
        if len(seen) == 1:
            await raw.execute(_insert(table), "lost", "{}")
            await _terminate(engine, raw)
            await raw.execute("SELECT 1")
        await raw.execute(_insert(table), "kept", "{}")
        return len(seen)

    assert await _uow(engine).run(work) == 2
    assert seen[0] is not seen[1] and seen[0].is_closed()
    async with engine.connect() as conn:
        assert await conn.scalar(select(table.c.msg_id)) == "kept"
    # The pool did not take the dead connection back: every connection it hands out works.
    for _ in range(3):
        async with engine.connect() as conn:
            assert await conn.scalar(select(1)) == 1


async def test_a_connection_lost_under_a_raw_statement_surfaces_as_itself_not_as_the_failed_rollback(
        outbox_rows_table):
    """Invalidated before the pool takes it back: the caller (a consumer's retry) sees why, not the rollback's
    "connection is closed" on the dead connection."""
    engine, _ = outbox_rows_table

    async def work(conn) -> None:
        raw = await driver_connection(conn)
        await _terminate(engine, raw)
        await raw.execute("SELECT 1")  # answered by the server's FATAL, or refused on the closed socket

    with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError)) as caught:  # not SQLAlchemy's
        await run_in_transaction(engine, work, attempts=1)
    assert is_transient(caught.value) and is_disconnect(caught.value)


def test_asyncpg_errors_are_classified_like_sqlalchemys():
    assert is_transient(asyncpg.SerializationError("x")) and is_transient(asyncpg.DeadlockDetectedError("x"))
    assert is_transient(asyncpg.ConnectionDoesNotExistError("x")) and is_transient(asyncpg.AdminShutdownError("x"))
    assert is_disconnect(asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"))
    assert is_disconnect(asyncpg.InterfaceError("cannot call Connection.execute(): connection is closed"))
    assert not is_disconnect(asyncpg.UniqueViolationError("x"))
    assert not is_transient(asyncpg.UniqueViolationError("x")) and not is_transient(asyncpg.InterfaceError("x"))
