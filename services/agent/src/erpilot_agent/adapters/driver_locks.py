"""The right to drive a session's run (``service_layer.ports.DriverLocks``): a PostgreSQL session-level advisory
lock held on a connection of its own while the driver works. It is released when the driver lets go, and by
PostgreSQL itself when the process dies, so a crashed driver never blocks its successor. (Infrastructure, not
a unit of work: the lock must outlive the many transactions one drive commits.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot_platform import advisory_locks

LOCK_NAMESPACE = advisory_locks.AGENT_RUNS  # first key of pg_advisory_lock(int, int); the second: hashtext(session_id)


class SqlDriverLocks:
    def __init__(self, engine: AsyncEngine):
        self.engine = engine

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[bool]:
        keys = {"ns": LOCK_NAMESPACE, "sid": session_id}
        async with self.engine.connect() as conn:
            # The connection idles between the drive's transactions while it holds the lock: PostgreSQL must not
            # close it for idling (``db.IDLE_SESSION_SECONDS``), which would free the lock under a live driver. Turned
            # off in the statement that takes the lock, back on (RESET: the connection's own setting) when it is let go.
            row = (await conn.execute(text("SELECT set_config('idle_session_timeout', '0', false), "
                                           "pg_try_advisory_lock(:ns, hashtext(:sid))"), keys)).one()
            held = bool(row[1])
            if not held:
                await conn.execute(text("RESET idle_session_timeout"))
            await conn.commit()  # a session-level lock outlives the transaction; do not sit idle in one
            try:
                yield held
            finally:
                if held:
                    try:
                        await conn.execute(text("SELECT pg_advisory_unlock(:ns, hashtext(:sid))"), keys)
                        await conn.execute(text("RESET idle_session_timeout"))
                        await conn.commit()
                    except BaseException:
                        # Never return a connection that may still hold the lock to the pool.
                        await conn.invalidate()
                        raise
