"""Escalation (SPEC §10): an approval still undecided ``escalate_after`` its creation gains ``escalate_to`` among
those who may decide it, once, on every replica and across restarts, never after a decision; its deadline stays.

A ``DueSweeper`` like expiry (``service_layer/sweeper.py``), one per replica: it reads the earliest
escalation due (read-only: nothing is committed while nothing is due) and sleeps until then, woken early when an
approval is stored (in-process ``wake``; every replica through the deadline notification of migration 0010, whose
listener wakes both sweepers), at most ``poll_seconds`` while it is not listening and ``LISTENING_POLL_SECONDS``
while it is. Due rows are taken with ``FOR UPDATE SKIP LOCKED`` and changed in one transaction with their
``evt.approval.escalated`` (named ``approval.escalated.<pending_id>``) and audit row: replicas share the
work, ``escalated_at`` makes it once, and a row a decision holds is skipped (the decision settles it: once it
commits the approval is no longer pending, and ``domain.approvals.escalate`` refuses anything but pending).
"""

from __future__ import annotations

import logging
from typing import Any

from erpilot_approval.domain.approvals import escalate
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.mapping import escalated_event
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Work
from erpilot_approval.service_layer.sweeper import DueSweeper
from erpilot_contracts import subjects
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


def escalation_sweeper(uow: ApprovalUnitOfWork, **options: Any) -> DueSweeper:
    """This replica's escalation sweeper (``options``: ``DueSweeper``'s poll_seconds, batch, listening)."""
    return DueSweeper(uow, name="escalation sweep", sweep=escalate_due,
                      seconds_to_next=lambda unit: unit.approvals.seconds_to_next_escalation(), **options)
