"""The ``erpilot.approval.pending`` gauge: a count of pending approvals, refreshed every few seconds.

The metric reader's callback runs on its own thread and only reads the cached value; the count itself
is one cheap indexed query from this service's event loop.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot_approval.adapters import repository
from erpilot_platform.telemetry import pending_approvals

log = logging.getLogger(__name__)


async def refresh_pending_gauge(engine: AsyncEngine, *, every_seconds: float = 5.0) -> None:
    """Forever; a failed count keeps the last value (the gauge is a hint, never a reason to stop)."""
    while True:
        try:
            async with engine.connect() as conn:
                pending_approvals.set(await repository.count_pending(conn))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.debug("could not count pending approvals", exc_info=True)
        await asyncio.sleep(every_seconds)
