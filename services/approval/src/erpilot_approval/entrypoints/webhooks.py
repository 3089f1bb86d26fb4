"""Durable event consumers that turn committed events into webhook deliveries (service_layer/webhook_events.py)
and the ledger's outcomes into the audit log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from erpilot_approval.service_layer.webhook_events import WebhookEvents
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import (
    ApprovalEscalatedV1,
    ApprovalExpiringV1,
    ApprovalRequestedV1,
    ApprovalResolvedV1,
)
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_platform.endpoints import ServiceBus


def register(bus: ServiceBus, events: WebhookEvents, audit: Callable[[OperationStatusV1], Awaitable[None]]) -> None:
    """``audit``: the ledger's outcome into the audit log (the one consumer of operation_finished here)."""
    @bus.event(subjects.APPROVAL_EVT_REQUESTED, ApprovalRequestedV1, description="Webhooks: approval.requested.")
    async def notify_requested(evt: ApprovalRequestedV1) -> None:
        await events.on_requested(evt.record.pending_id)

    @bus.event(subjects.APPROVAL_EVT_EXPIRING, ApprovalExpiringV1, description="Webhooks: approval.expiring.")
    async def notify_expiring(evt: ApprovalExpiringV1) -> None:
        await events.on_expiring(evt)

    @bus.event(subjects.APPROVAL_EVT_ESCALATED, ApprovalEscalatedV1, description="Webhooks: approval.escalated.")
    async def notify_escalated(evt: ApprovalEscalatedV1) -> None:
        await events.on_escalated(evt)

    @bus.event(subjects.APPROVAL_EVT_RESOLVED, ApprovalResolvedV1, description="Webhooks: approval.resolved.")
    async def notify_resolved(evt: ApprovalResolvedV1) -> None:
        await events.on_resolved(evt)

    @bus.event(subjects.ERP_EVT_OPERATION_FINISHED, OperationStatusV1, description="Webhooks: operation.finished.")
    async def notify_finished(evt: OperationStatusV1) -> None:
        await audit(evt)
        await events.on_operation_finished(evt)
