"""The expiry sweeper, one per replica: each pending approval expires once, within a second of its deadline.

It reads the earliest pending deadline (read-only: nothing is committed while nothing is due) and
sleeps until it, woken early when an approval is stored: by this replica in-process (``wake``), and by
any replica through PostgreSQL (``LISTEN`` on ``DEADLINES_CHANNEL``, notified at the storing commit by
migration 0010's trigger; ``erpilot_platform.notifications``). Only while it is not listening (start-up,
the database away) does it sleep at most ``poll_seconds`` (1 s), so that an approval stored by another
replica that then died still expires within a second of its deadline; while listening it looks at least
every ``LISTENING_POLL_SECONDS`` in case a notification was lost unseen. When something is due it expires it
in one transaction per batch: the rows are taken with ``FOR UPDATE SKIP LOCKED``, so replicas share the
work and never expire a row twice, and a row a decision holds is left to that decision (which refuses it
as expired itself when late).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from erpilot_approval.service_layer.common import expire_if_due
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Work
from erpilot_platform.loops import Soon, every
from erpilot_platform.telemetry import step

log = logging.getLogger(__name__)
EPSILON_SECONDS = 0.001
HELD_SECONDS = 0.05  # a due row that a decision holds: look again shortly
DEADLINES_CHANNEL = "erpilot_approval_deadlines"  # migration 0010_deadline_notify
LISTENING_POLL_SECONDS = 60.0


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


class ExpirySweeper:
    def __init__(self, uow: ApprovalUnitOfWork, *, poll_seconds: float = 1.0, batch: int = 200,
                 listening: Callable[[], bool] = lambda: False):
        self._wake = asyncio.Event()
        self.uow = uow
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.listening = listening  # told of every replica's new deadlines (``notifications.Listener``)

    async def sweep_once(self) -> int:
        """Expire one batch of due approvals with their events; returns how many."""
        return await expire_due(self.uow, self.batch)

    def wake(self) -> None:
        """A new deadline was stored (or the listener started or stopped listening): look again now."""
        self._wake.set()

    async def seconds_to_next_deadline(self) -> float | None:
        return await self.uow.read(lambda unit: unit.approvals.seconds_to_next_deadline())

    async def run(self) -> None:
        """Forever; a database outage is logged and retried every second, never fatal."""
        await every(self.poll_seconds, self.sweep_due, wake=self._wake, name="expiry sweep",
                    retry_after=1.0, max_retry_after=1.0)

    async def sweep_due(self) -> Soon | None:
        """Expire what is due; when to look again (the next deadline, never later than the longest sleep)."""
        longest = LISTENING_POLL_SECONDS if self.listening() else self.poll_seconds
        seconds = await self.seconds_to_next_deadline()
        if seconds is not None and seconds <= 0:
            return Soon(0) if await self.sweep_once() else Soon(HELD_SECONDS)  # more may be due right now
        return Soon(longest if seconds is None else min(seconds + EPSILON_SECONDS, longest))
