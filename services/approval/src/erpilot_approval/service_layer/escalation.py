"""Escalation (SPEC §10): an approval still undecided ``escalate_after`` its creation gains ``escalate_to`` among
those who may decide it, once, on every replica and across restarts, never after a decision; its deadline stays.

The same shape as the expiry sweeper (``service_layer/expiry.py``), one per replica: it reads the earliest
escalation due (read-only: nothing is committed while nothing is due) and sleeps until then, woken early when an
approval is stored (in-process ``wake``; every replica through the deadline notification of migration 0010, whose
listener wakes both sweepers), at most ``poll_seconds`` while it is not listening and ``LISTENING_POLL_SECONDS``
while it is. Due rows are taken with ``FOR UPDATE SKIP LOCKED`` and changed in one transaction with their
``evt.approval.escalated`` (``Nats-Msg-Id`` ``approval.escalated.<pending_id>``) and audit row: replicas share the
work, ``escalated_at`` makes it once, and a row a decision holds is skipped (the decision settles it: once it
commits the approval is no longer pending, and ``domain.approvals.escalate`` refuses anything but pending).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from erpilot_approval.domain.approvals import escalate
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.expiry import EPSILON_SECONDS, HELD_SECONDS, LISTENING_POLL_SECONDS
from erpilot_approval.service_layer.mapping import escalated_event
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Work
from erpilot_contracts import subjects
from erpilot_platform.loops import Soon, every
from erpilot_platform.telemetry import step

log = logging.getLogger(__name__)


def escalated_msg_id(pending_id: str) -> str:
    return f"approval.escalated.{pending_id}"


async def escalate_due(uow: ApprovalUnitOfWork, batch: int) -> int:
    """Escalate one batch of due approvals with their events and audit rows, in one unit of work; how many."""

    async def work(unit: Work) -> int:
        now = await unit.now()
        escalated = 0
        for approval in await unit.approvals.lock_due_escalations(now, batch):
            raised = escalate(approval, now)
            if raised is None:
                continue
            origin = await unit.approvals.trace_context(approval.pending_id)
            with step("approval", "escalate", resume=origin, pending_id=approval.pending_id,
                      call_id=approval.call_id, session_id=approval.session_id, operation_id=approval.operation_id):
                await unit.approvals.save_escalation(raised)
                await unit.emit(subjects.APPROVAL_EVT_ESCALATED, escalated_event(raised),
                                msg_id=escalated_msg_id(raised.pending_id))
                await audit.escalated(unit.audit, raised)
            escalated += 1
        return escalated

    escalated = await uow.run(work)
    if escalated:
        log.info("escalated %d approval(s)", escalated)
    return escalated


class EscalationSweeper:
    def __init__(self, uow: ApprovalUnitOfWork, *, poll_seconds: float = 1.0, batch: int = 200,
                 listening: Callable[[], bool] = lambda: False):
        self._wake = asyncio.Event()
        self.uow = uow
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.listening = listening

    async def sweep_once(self) -> int:
        return await escalate_due(self.uow, self.batch)

    def wake(self) -> None:
        """A new approval was stored (or the listener started or stopped listening): look again now."""
        self._wake.set()

    async def seconds_to_next_escalation(self) -> float | None:
        return await self.uow.read(lambda unit: unit.approvals.seconds_to_next_escalation())

    async def run(self) -> None:
        """Forever; a database outage is logged and retried every second, never fatal."""
        await every(self.poll_seconds, self.sweep_due, wake=self._wake, name="escalation sweep",
                    retry_after=1.0, max_retry_after=1.0)

    async def sweep_due(self) -> Soon | None:
        """Escalate what is due; when to look again (the next escalation, never later than the longest sleep)."""
        longest = LISTENING_POLL_SECONDS if self.listening() else self.poll_seconds
        seconds = await self.seconds_to_next_escalation()
        if seconds is not None and seconds <= 0:
            return Soon(0) if await self.sweep_once() else Soon(HELD_SECONDS)  # more may be due right now
        return Soon(longest if seconds is None else min(seconds + EPSILON_SECONDS, longest))
