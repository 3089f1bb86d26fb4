"""The async SQLAlchemy engine, transactions and the retry of serialization failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

log = logging.getLogger(__name__)
T = TypeVar("T")

# SQLSTATEs worth retrying: serialization_failure, deadlock_detected.
RETRYABLE_SQLSTATES = {"40001", "40P01"}


def sqlalchemy_url(libpq_url: str) -> str:
    """Turn any libpq URL (``postgresql://user@/db?host=/dir`` included) into an asyncpg one."""
    url = make_url(libpq_url)
    if url.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        url = url.set(drivername="postgresql+asyncpg")
    return url.render_as_string(hide_password=False)


def create_engine(libpq_url: str, *, pool_size: int = 20, application_name: str = "erpilot") -> AsyncEngine:
    """An engine for one service; nothing connects until first use."""
    return create_async_engine(
        sqlalchemy_url(libpq_url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        connect_args={"server_settings": {"application_name": application_name}},
    )


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


async def run_in_transaction(
    engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[T]], *, attempts: int = 5
) -> T:
    """Run ``work`` in a transaction, retrying serialization failures and deadlocks a bounded number of times."""
    for attempt in range(1, attempts + 1):
        try:
            async with engine.begin() as conn:
                return await work(conn)
        except DBAPIError as exc:
            if _sqlstate(exc) not in RETRYABLE_SQLSTATES or attempt == attempts:
                raise
            log.info("retrying transaction after %s (attempt %d)", _sqlstate(exc), attempt)
            await asyncio.sleep(0.01 * attempt)
    raise AssertionError("unreachable")
