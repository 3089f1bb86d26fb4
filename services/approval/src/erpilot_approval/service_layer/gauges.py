"""The ``erpilot.approval.pending`` gauge: a count of pending approvals, refreshed every few seconds.

The metric reader's callback runs on its own thread and only reads the cached value; the count itself
is one cheap indexed query from this service's event loop.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot_approval.adapters import repository
from erpilot_platform.loops import every
from erpilot_platform.telemetry import pending_approvals


async def refresh_pending_gauge(engine: AsyncEngine, *, every_seconds: float = 5.0) -> None:
    """Forever; a failed count keeps the last value (the gauge is a hint, never a reason to stop)."""
    async def count() -> None:
        async with engine.connect() as conn:
            pending_approvals.set(await repository.count_pending(conn))

    await every(every_seconds, count, name="counting pending approvals", failure_level=logging.DEBUG)
