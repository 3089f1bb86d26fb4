"""Durable event consumers that turn committed events into webhook deliveries (service_layer/webhook_events.py)
and the ledger's outcomes into the audit log; each handler is ``async def handle(evt, notify: WebhookEvents)``."""

from __future__ import annotations

from erpilot_approval.service_layer.audit_queries import record_operation_finished
from erpilot_approval.service_layer.webhook_events import WebhookEvents
from erpilot_contracts import events
from erpilot_contracts.approval.v1 import (
    ApprovalEscalatedV1,
    ApprovalExpiringV1,
    ApprovalRequestedV1,
    ApprovalResolvedV1,
)
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_platform.endpoints import ServiceBus


async def notify_requested(evt: ApprovalRequestedV1, notify: WebhookEvents) -> None:
    """Webhooks: approval.requested."""
    await notify.on_requested(evt.record.pending_id)


async def notify_expiring(evt: ApprovalExpiringV1, notify: WebhookEvents) -> None:
    """Webhooks: approval.expiring."""
    await notify.on_expiring(evt)


async def notify_escalated(evt: ApprovalEscalatedV1, notify: WebhookEvents) -> None:
    """Webhooks: approval.escalated."""
    await notify.on_escalated(evt)


async def notify_resolved(evt: ApprovalResolvedV1, notify: WebhookEvents) -> None:
    """Webhooks: approval.resolved."""
    await notify.on_resolved(evt)


async def notify_finished(evt: OperationStatusV1, notify: WebhookEvents) -> None:
    """Webhooks: operation.finished (the one consumer of operation_finished here: also the audit log's record)."""
    await record_operation_finished(evt, notify.unit)
    await notify.on_operation_finished(evt)


HANDLERS = {
    events.APPROVAL_REQUESTED: notify_requested,
    events.APPROVAL_EXPIRING: notify_expiring,
    events.APPROVAL_ESCALATED: notify_escalated,
    events.APPROVAL_RESOLVED: notify_resolved,
    events.ERP_OPERATION_FINISHED: notify_finished,
}


def register(bus: ServiceBus, notify: WebhookEvents) -> None:
    bus.register(HANDLERS, notify)
