"""Database commits and write transactions per cycle, from PostgreSQL's own counters.

- commits: ``pg_stat_database.xact_commit`` of the measured database (every committed transaction,
  read-only ones included: an autocommit SELECT counts). Backends flush these statistics when they
  go idle, at most once a second, so the closing reading is taken ``SETTLE_SECONDS`` after the phase
  and what the idle stack commits in that time (measured beforehand) is taken off.
- write transactions: ``pg_snapshot_xmax(pg_current_snapshot())`` is the next transaction id to be
  assigned; PostgreSQL assigns one only to a transaction (or subtransaction, a SAVEPOINT) that writes,
  so the difference of two readings counts write transactions, exactly and at once, and reading it
  assigns none. The counter is cluster-wide: nothing else may write in the cluster meanwhile (the
  peer runs after the product's services have stopped).

The readings come from a connection to another database of the same server (``postgres``), so they
add no commit to the measured one. asyncpg is used (a dependency of the services and of the peer).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

SETTLE_SECONDS = 1.2
COUNTERS_SQL = (
    "SELECT xact_commit, xact_rollback, pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next_xid "
    "FROM pg_stat_database WHERE datname = $1"
)


@dataclass(frozen=True)
class DbCounters:
    commits: int
    rollbacks: int
    next_xid: int


async def read_counters(connection, database: str) -> DbCounters:
    """One reading (see the module docstring); ``connection`` is an asyncpg connection."""
    await connection.execute("SELECT pg_stat_clear_snapshot()")  # no cached statistics snapshot
    row = await connection.fetchrow(COUNTERS_SQL, database)
    if row is None:
        raise RuntimeError(f"no database {database!r} in pg_stat_database")
    return DbCounters(int(row["xact_commit"]), int(row["xact_rollback"]), int(row["next_xid"]))


def admin_url(database_url: str, database: str = "postgres") -> tuple[str, str]:
    """(the same server's URL for ``database``, the measured database's name) from a libpq URL.

    The driver prefix SQLAlchemy uses (``postgresql+asyncpg://``) is dropped for asyncpg.
    """
    parts = urlsplit(database_url.replace("postgresql+asyncpg://", "postgresql://", 1))
    measured = parts.path.lstrip("/") or "postgres"
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment)), measured
