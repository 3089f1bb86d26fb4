"""The expiry sweeper: each pending approval expires once, within a second of its deadline.

A ``DueSweeper`` (``service_layer/sweeper.py``: read-only until something is due, woken by the deadline
notifications of every replica). Due approvals expire in one transaction per batch; a row a decision holds
is left to that decision (which refuses it as expired itself when late).
"""

from __future__ import annotations

import logging
from typing import Any

from erpilot_approval.service_layer.common import expire_if_due
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Work
from erpilot_approval.service_layer.sweeper import DueSweeper
from erpilot_platform.telemetry import step

log = logging.getLogger(__name__)


async def expire_due(uow: ApprovalUnitOfWork, batch: int) -> int:
    """Expire one batch of due approvals with their events, in one unit of work; returns how many."""

    async def work(unit: Work) -> int:
        now = await unit.now()
        expired = 0
        for approval in await unit.approvals.lock_due(now, batch):
            origin = await unit.approvals.trace_context(approval.pending_id)
            with step("approval", "expire", resume=origin, pending_id=approval.pending_id,
                      call_id=approval.call_id, session_id=approval.session_id, operation_id=approval.operation_id):
                expired += await expire_if_due(unit, approval, now)
        return expired

    expired = await uow.run(work)  # the relay is woken by the commit of what it emitted
    if expired:
        log.info("expired %d approval(s)", expired)
    return expired



def expiry_sweeper(uow: ApprovalUnitOfWork, **options: Any) -> DueSweeper:
    """This replica's expiry sweeper (``options``: ``DueSweeper``'s poll_seconds, batch, listening)."""
    return DueSweeper(uow, name="expiry sweep", sweep=expire_due,
                      seconds_to_next=lambda unit: unit.approvals.seconds_to_next_deadline(), **options)
