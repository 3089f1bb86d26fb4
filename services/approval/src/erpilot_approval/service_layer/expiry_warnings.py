"""``approval_expiring``: once per pending approval, ``warn_before`` its deadline (per tool and per amount
rule in the policy, off by default), also after a restart, never after the approval ended.

The warning is a row in ``expiry_warnings`` written with its ``evt.approval.expiring`` outbox event in
one transaction that holds the approval's row lock and finds it still pending: a decision either
comes first (no warning) or waits for the lock (the warning was true when sent). The agent puts it on
the session stream; the webhook consumers turn it into an ``approval.expiring`` delivery.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from erpilot_approval.domain.policy import Policy
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Work
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import ApprovalExpiringV1
from erpilot_platform.loops import every

log = logging.getLogger(__name__)


class WarningSweeper:
    def __init__(self, uow: ApprovalUnitOfWork, policy: Policy, *, poll_seconds: float = 0.5, batch: int = 200):
        self.unit = uow
        self.policy = policy
        # Per tool, the longest warning any approval of it may get (the tool's or an amount rule's).
        self.windows: dict[str, timedelta] = {
            name: window for name, tool in policy.tools.items() if (window := tool.longest_warning())}
        self.poll_seconds = poll_seconds
        self.batch = batch

    async def sweep_once(self) -> int:
        """Warn every approval that is due now; returns how many."""

        async def work(unit: Work) -> int:
            now = await unit.now()
            warned = 0
            for tool, window in self.windows.items():
                for approval in await unit.approvals.lock_due_warnings(tool, window, now, self.batch):
                    amount = approval.preview.get("amount_minor")
                    warn_before = self.policy.for_tool(tool).warn_before_for(amount if type(amount) is int else None)
                    if warn_before is None or approval.expires_at - warn_before > now:
                        continue  # its own warning time (by amount) has not come
                    if await unit.approvals.record_warning(approval.pending_id, now):
                        await unit.emit(subjects.APPROVAL_EVT_EXPIRING, ApprovalExpiringV1(
                            pending_id=approval.pending_id, call_id=approval.call_id,
                            session_id=approval.session_id, operation_id=approval.operation_id, tool=approval.tool,
                            expires_at=approval.expires_at, warned_at=now))
                        warned += 1
            return warned

        warned = await self.unit.run(work)
        if warned:
            log.info("warned %d approval(s) of their deadline", warned)
        return warned

    async def run(self) -> None:
        """Forever (nothing to do when no tool has ``warn_before``); failures are logged and retried."""
        if not self.windows:
            return
        await every(self.poll_seconds, self.sweep_once, name="expiry warning sweep")
