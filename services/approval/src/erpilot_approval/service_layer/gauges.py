"""The ``erpilot.approval.pending`` gauge: a count of pending approvals, refreshed every few seconds.

The metric reader's callback runs on its own thread and only reads the cached value; the count itself
is one cheap indexed query from this service's event loop.
"""

from __future__ import annotations

import logging

from erpilot_approval.service_layer.ports import ApprovalUnitOfWork
from erpilot_platform.loops import every
from erpilot_platform.telemetry import pending_approvals


async def refresh_pending_gauge(uow: ApprovalUnitOfWork, *, every_seconds: float = 5.0) -> None:
    """Forever; a failed count keeps the last value (the gauge is a hint, never a reason to stop)."""
    async def count() -> None:
        pending_approvals.set(await uow.read(lambda unit: unit.approvals.count_pending()))

    await every(every_seconds, count, name="counting pending approvals", failure_level=logging.DEBUG)
