"""The async SQLAlchemy engine, transactions and the retry of serialization failures, and the asyncpg connection
under a SQLAlchemy one for the hot statements (``driver_connection``, issue 31 item 4)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import asyncpg
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

log = logging.getLogger(__name__)
T = TypeVar("T")

# SQLSTATEs worth retrying: serialization_failure, deadlock_detected.
RETRYABLE_SQLSTATES = {"40001", "40P01"}
# Connections older than this are replaced at checkout (a proxy or firewall may drop idle ones silently).
POOL_RECYCLE_SECONDS = 1800
# PostgreSQL closes a pooled connection idle this long (``idle_session_timeout``, PostgreSQL 14+; never one inside
# a transaction): the connections a burst of load opened are given back, each a backend of ~5 MB of its own (issue
# 31 item 5: 29 of them kept the warm stack 150 MB above its idle self). The pool hands out the most recently used
# connection first (``pool_use_lifo``), so under load the same few serve and the spare ones are those that idle; the
# checkout hook replaces one the server closed. A connection held outside a transaction on purpose (a session-level
# advisory lock) turns this off for itself.
IDLE_SESSION_SECONDS = 10


def sqlalchemy_url(libpq_url: str) -> str:
    """Turn any libpq URL (``postgresql://user@/db?host=/dir`` included) into an asyncpg one."""
    url = make_url(libpq_url)
    if url.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        url = url.set(drivername="postgresql+asyncpg")
    return url.render_as_string(hide_password=False)


def create_engine(libpq_url: str, *, pool_size: int = 20, application_name: str = "erpilot") -> AsyncEngine:
    """An engine for one service; nothing connects until first use.

    No ``pool_pre_ping``: it costs a round trip and a rollback on every checkout. Instead a checkout
    refuses a connection whose socket asyncpg already saw closed (a PostgreSQL restart closes them all;
    no round trip), connections are recycled after ``POOL_RECYCLE_SECONDS``, and a connection lost
    before the commit is retried by ``run_in_transaction`` (elsewhere it is a transient failure: a
    consumer is redelivered). The first disconnect error also invalidates the rest of the pool.
    """
    engine = create_async_engine(
        sqlalchemy_url(libpq_url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_recycle=POOL_RECYCLE_SECONDS,
        pool_use_lifo=True,
        connect_args={"server_settings": {"application_name": application_name,
                                          "idle_session_timeout": f"{IDLE_SESSION_SECONDS}s"}},
    )
    event.listen(engine.sync_engine.pool, "checkout", _refuse_closed_connection)
    return engine


def _refuse_closed_connection(dbapi_connection, connection_record, connection_proxy) -> None:
    """Pool checkout hook: a connection whose socket is known closed is replaced (the pool retries)."""
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("connection closed by the server")


@asynccontextmanager
async def transaction(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """One database transaction: committed when the block ends, rolled back on error."""
    async with engine.begin() as conn:
        yield conn


async def driver_connection(conn: AsyncConnection) -> asyncpg.Connection:
    """The asyncpg connection under ``conn``, inside ``conn``'s transaction: a hot statement runs on it as a
    prepared statement (asyncpg's statement cache prepares it once per connection), without SQLAlchemy's
    compilation cache look-up, execution context, result processing and greenlet hop.

    SQLAlchemy's asyncpg adapter sends BEGIN lazily, with its first statement: a statement sent straight to
    asyncpg before any SQLAlchemy one would run outside the transaction and commit on its own, and
    ``conn.commit()`` would then commit nothing (SQLAlchemy's own transaction would not have begun either). So
    both are begun here first: SQLAlchemy's (which ``conn.commit()`` and a rollback end) and the adapter's
    asyncpg transaction, with the isolation level the engine set (nothing on an AUTOCOMMIT connection, a ``read``
    unit of work's: each statement commits on its own there, as SQLAlchemy's do).

    Errors come as asyncpg's own exceptions (no ``DBAPIError`` wrapper): ``is_transient``, ``is_disconnect`` and
    ``run_in_transaction`` read them too. JSON goes as text and comes back parsed (the codecs SQLAlchemy's
    dialect sets on every connection)."""
    if not conn.in_transaction():
        await conn.begin()
    # No I/O: a unit of work's connection was checked out when it was opened (a revalidation, which would need
    # the greenlet, happens only after an invalidation, and then the unit of work has failed already).
    adapted = conn.sync_connection.connection.dbapi_connection
    if adapted._transaction is None:  # the adapter's lazy BEGIN (sqlalchemy/dialects/postgresql/asyncpg.py)
        async with adapted._execute_mutex:
            if adapted._transaction is None:
                await adapted._start_transaction()
    return adapted.driver_connection


class Fields:
    """An asyncpg record read by attribute (``row.name``), as a SQLAlchemy row is: the adapters' mappings to the
    domain take either."""

    __slots__ = ("_record",)

    def __init__(self, record: asyncpg.Record):
        self._record = record

    def __getattr__(self, name: str):
        try:
            return self._record[name]
        except KeyError:
            raise AttributeError(name) from None


def fields(record: asyncpg.Record | None) -> Fields | None:
    return None if record is None else Fields(record)


def _asyncpg_error(exc: BaseException) -> BaseException | None:
    """The asyncpg exception ``exc`` is or wraps (SQLAlchemy's ``orig`` and its adapter's ``__cause__``)."""
    for candidate in (exc, getattr(exc, "orig", None), exc.__cause__, getattr(getattr(exc, "orig", None),
                                                                            "__cause__", None)):
        if isinstance(candidate, asyncpg.PostgresError | asyncpg.InterfaceError):
            return candidate
    return None


def _sqlstate(exc: BaseException) -> str | None:
    if (error := _asyncpg_error(exc)) is not None:
        return getattr(error, "sqlstate", None)
    orig = getattr(exc, "orig", None)  # SQLAlchemy's wrapper of another driver's error (and the tests' fakes)
    return getattr(orig, "sqlstate", None) or getattr(getattr(orig, "__cause__", None), "sqlstate", None)


def is_unique_violation(exc: BaseException) -> bool:
    """A unique constraint refused the write: SQLAlchemy's ``IntegrityError`` or, from a statement of
    ``driver_connection``, asyncpg's own ``UniqueViolationError``."""
    return _sqlstate(exc) == "23505"


# A backend ended by the server (a restart, a failover, pg_terminate_backend) answers its next statement with one
# of these before its socket closes.
_SHUTDOWN_SQLSTATES = {"57P01", "57P02", "57P03"}


def _driver_lost(exc: BaseException) -> bool:
    """An error raised straight by asyncpg (a statement of ``driver_connection``) that lost the connection:
    SQLAlchemy did not see it, so it invalidated nothing."""
    if isinstance(exc, DBAPIError):
        return False
    if isinstance(exc, asyncpg.PostgresConnectionError | ConnectionError):
        return True
    if isinstance(exc, asyncpg.InterfaceError):
        return "connection is closed" in str(exc)
    return isinstance(exc, asyncpg.PostgresError) and exc.sqlstate in _SHUTDOWN_SQLSTATES


def is_transient(exc: BaseException) -> bool:
    """True for failures a retry can cure: serialization, deadlock, lost connection."""
    if isinstance(exc, OperationalError | ConnectionError | OSError | asyncio.TimeoutError):
        return True
    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated or _sqlstate(exc) in RETRYABLE_SQLSTATES
    if isinstance(exc, asyncpg.PostgresError):
        return _driver_lost(exc) or exc.sqlstate in RETRYABLE_SQLSTATES
    return _driver_lost(exc)


def is_disconnect(exc: BaseException) -> bool:
    """True when the connection was lost (SQLAlchemy invalidated it, or asyncpg lost it under a statement of
    ``driver_connection``: ``run_in_transaction`` invalidates it then)."""
    return (isinstance(exc, DBAPIError) and exc.connection_invalidated) or _driver_lost(exc)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, DBAPIError | asyncpg.PostgresError | asyncpg.InterfaceError | ConnectionError)


async def run_in_transaction(
    engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[T]], *, attempts: int = 5
) -> T:
    """Run ``work`` in a transaction, retrying serialization failures, deadlocks and a connection lost
    before the commit a bounded number of times. A connection lost during the commit is not retried
    here (its outcome is unknown): it reaches the caller as a transient failure."""
    for attempt in range(1, attempts + 1):
        committing = False
        try:
            async with engine.connect() as conn:
                try:
                    result = await work(conn)
                    committing = True
                    await conn.commit()
                    return result
                except BaseException as exc:
                    if _driver_lost(exc):  # not seen by SQLAlchemy: the pool must not take the dead connection back
                        await conn.invalidate()
                    raise
        except Exception as exc:
            if not _retryable(exc):
                raise
            lost_before_commit = is_disconnect(exc) and not committing
            if not (lost_before_commit or _sqlstate(exc) in RETRYABLE_SQLSTATES) or attempt == attempts:
                raise
            log.info("retrying transaction after %s (attempt %d)",
                     "a lost connection" if lost_before_commit else _sqlstate(exc), attempt)
            await asyncio.sleep(0.01 * attempt)
    raise AssertionError("unreachable")
