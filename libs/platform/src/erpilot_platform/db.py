"""The async SQLAlchemy engine, transactions and the retry of serialization failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

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


def _sqlstate(exc: BaseException) -> str | None:
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) or getattr(getattr(orig, "__cause__", None), "sqlstate", None)


def is_transient(exc: BaseException) -> bool:
    """True for failures a retry can cure: serialization, deadlock, lost connection."""
    if isinstance(exc, OperationalError | ConnectionError | OSError | asyncio.TimeoutError):
        return True
    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated or _sqlstate(exc) in RETRYABLE_SQLSTATES
    return False


def is_disconnect(exc: BaseException) -> bool:
    """True when the connection was lost (SQLAlchemy invalidated it)."""
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


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
                result = await work(conn)
                committing = True
                await conn.commit()
                return result
        except DBAPIError as exc:
            lost_before_commit = is_disconnect(exc) and not committing
            if not (lost_before_commit or _sqlstate(exc) in RETRYABLE_SQLSTATES) or attempt == attempts:
                raise
            log.info("retrying transaction after %s (attempt %d)",
                     "a lost connection" if lost_before_commit else _sqlstate(exc), attempt)
            await asyncio.sleep(0.01 * attempt)
    raise AssertionError("unreachable")
