"""The shape both of the approval service's timed jobs share (expiry, escalation), one per replica.

A sweeper reads when its next row falls due (read-only: nothing is committed while nothing is due) and
sleeps until then, woken early when an approval is stored: by this replica in-process (``wake``), and by
any replica through PostgreSQL (``LISTEN`` on ``DEADLINES_CHANNEL``, notified at the storing commit by
migration 0010's trigger; ``erpilot_platform.notifications``). Only while it is not listening (start-up,
the database away) does it sleep at most ``poll_seconds`` (1 s), so that an approval stored by another
replica that then died is still handled within a second; while listening it looks at least every
``LISTENING_POLL_SECONDS`` in case a notification was lost unseen. What is due is handled by ``sweep``, one
batch per unit of work, its rows taken with ``FOR UPDATE SKIP LOCKED`` so replicas share the work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Work
from erpilot_platform.loops import Soon, every

EPSILON_SECONDS = 0.001
HELD_SECONDS = 0.05  # a due row that a decision holds: look again shortly
DEADLINES_CHANNEL = "erpilot_approval_deadlines"  # migration 0010_deadline_notify
LISTENING_POLL_SECONDS = 60.0


class DueSweeper:
    def __init__(self, uow: ApprovalUnitOfWork, *, name: str,
                 sweep: Callable[[ApprovalUnitOfWork, int], Awaitable[int]],
                 seconds_to_next: Callable[[Work], Awaitable[float | None]],
                 poll_seconds: float = 1.0, batch: int = 200, listening: Callable[[], bool] = lambda: False):
        self._wake = asyncio.Event()
        self.unit = uow
        self.name = name
        self._sweep = sweep
        self._seconds_to_next = seconds_to_next
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.listening = listening  # told of every replica's new approvals (``notifications.Listener``)

    async def sweep_once(self) -> int:
        """Handle one batch of due approvals with their events; returns how many."""
        return await self._sweep(self.unit, self.batch)

    def wake(self) -> None:
        """A new approval was stored (or the listener started or stopped listening): look again now."""
        self._wake.set()

    async def seconds_to_next_due(self) -> float | None:
        return await self.unit.read(self._seconds_to_next)

    async def run(self) -> None:
        """Forever; a database outage is logged and retried every second, never fatal."""
        await every(self.poll_seconds, self.sweep_due, wake=self._wake, name=self.name,
                    retry_after=1.0, max_retry_after=1.0)

    async def sweep_due(self) -> Soon | None:
        """Handle what is due; when to look again (the next due row, never later than the longest sleep)."""
        longest = LISTENING_POLL_SECONDS if self.listening() else self.poll_seconds
        seconds = await self.seconds_to_next_due()
        if seconds is not None and seconds <= 0:
            return Soon(0) if await self.sweep_once() else Soon(HELD_SECONDS)  # more may be due right now
        return Soon(longest if seconds is None else min(seconds + EPSILON_SECONDS, longest))
