"""From committed events to webhook deliveries (ARCHITECTURE "Outgoing webhooks").

The approval service consumes ``evt.approval.requested|resolved|expiring|escalated`` (its own outbox's events)
and ``evt.erp.operation_finished`` from ERPILOT_EVENTS with durable consumers. Each event becomes one
delivery row per subscribed endpoint, keyed by a stable event id, so a redelivered event adds nothing
and a receiver sees the same ``webhook-id`` on every retry. What the payload says comes from this
service's approval record and the ledger's event, never from the agent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from erpilot_approval.domain import chat, notices
from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.webhooks import Webhook, body_of, event_id
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Work
from erpilot_contracts.approval.v1 import ApprovalEscalatedV1, ApprovalExpiringV1, ApprovalResolvedV1
from erpilot_contracts.erp.v1 import OperationStatusV1

log = logging.getLogger(__name__)


# Approval emails ride the webhook deliveries (lease, retry, dead letter): one row per approval and person, its
# ``url`` the address as ``mailto:<address>``, its body naming the person; links are minted when it is sent.
MAIL_EVENT = "approval.email"
CARD_EVENT = "chat.card"  # the chat card of a new approval: its body is the Slack message, posted unsigned
Recipients = Callable[[PendingApproval], list[tuple[str, str]]]


class WebhookEvents:
    def __init__(self, uow: ApprovalUnitOfWork, webhooks: tuple[Webhook, ...], public_url: str,
                 wake=lambda: None, mail_recipients: Recipients | None = None, chat_url: str | None = None):
        self.unit = uow
        self.webhooks = webhooks
        self.public_url = public_url.rstrip("/")
        self.wake = wake
        self.mail_recipients = mail_recipients  # None: no SMTP server configured
        self.chat_url = chat_url  # [channels.chat] url; None: no chat card

    def wants(self, event_type: str) -> list[str]:
        return [hook.url for hook in self.webhooks if event_type in hook.events]

    async def on_requested(self, pending_id: str) -> None:
        async def build(approval: PendingApproval, _: str | None) -> tuple[datetime, dict, str]:
            text = notices.requested(self._what(approval), approval.required_roles, self._url(approval))
            return approval.created_at, {**self._data(approval), "status": "pending"}, text

        await self._record("approval.requested", pending_id, pending_id, build)
        await self._mail(pending_id)
        if self.chat_url:
            async def card(approval: PendingApproval, status: str | None) -> tuple[datetime, dict, str] | None:
                return None if status != "pending" else (approval.created_at, chat.card(approval, self._url(approval)),
                                                          "")
            await self._record(CARD_EVENT, pending_id, pending_id, card, urls=[self.chat_url])

    async def _mail(self, pending_id: str) -> None:
        """One email per person who may decide it (exactly once: a redelivered event adds no row)."""
        if self.mail_recipients is None:
            return
        approval = await self.unit.read(lambda unit: unit.approvals.get(pending_id))
        if approval is None or approval.status != "pending":
            return
        for sub, address in self.mail_recipients(approval):
            body = json.dumps({"pending_id": pending_id, "sub": sub}, separators=(",", ":"))
            added = await self.unit.run(lambda unit, body=body, address=address: unit.webhooks.add(
                event_id=event_id(MAIL_EVENT, pending_id), event_type=MAIL_EVENT, pending_id=pending_id,
                body=body, urls=[f"mailto:{address}"]))
            if added:
                self.wake()

    async def on_expiring(self, evt: ApprovalExpiringV1) -> None:
        async def build(approval: PendingApproval, status: str | None) -> tuple[datetime, dict, str] | None:
            if status != "pending":
                return None  # ended meanwhile: a warning now would be false
            text = notices.expiring(self._what(approval), approval.required_roles,
                                    approval.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC"), self._url(approval))
            return evt.warned_at, {**self._data(approval), "warned_at": evt.warned_at.isoformat()}, text

        await self._record("approval.expiring", evt.pending_id, evt.pending_id, build)

    async def on_escalated(self, evt: ApprovalEscalatedV1) -> None:
        async def build(approval: PendingApproval, status: str | None) -> tuple[datetime, dict, str] | None:
            if status != "pending":
                return None  # decided meanwhile: "managers may now decide" would be false
            text = notices.escalated(self._what(approval), evt.escalated_to, evt.required_roles, self._url(approval))
            return evt.escalated_at, {**self._data(approval), "required_roles": evt.required_roles,
                                      "escalated_to": evt.escalated_to,
                                      "escalated_at": evt.escalated_at.isoformat()}, text

        await self._record("approval.escalated", evt.pending_id, evt.pending_id, build)

    async def on_resolved(self, evt: ApprovalResolvedV1) -> None:
        async def build(approval: PendingApproval, _: str | None) -> tuple[datetime, dict, str]:
            data = {**self._data(approval), "status": evt.status, "decided_by": evt.decided_by,
                    "decided_on_behalf_of": evt.decided_on_behalf_of,
                    "decided_at": evt.decided_at.isoformat() if evt.decided_at else None, "comment": evt.comment,
                    "superseded_by": evt.superseded_by}
            text = notices.resolved(self._what(approval), evt.status, evt.decided_by, evt.decided_on_behalf_of)
            return evt.decided_at or approval.created_at, data, text

        await self._record("approval.resolved", evt.pending_id, evt.pending_id, build)

    async def on_operation_finished(self, status: OperationStatusV1) -> None:
        if status.status == "prepared" or not self.wants("operation.finished"):
            return
        async def look(unit: Work) -> tuple[PendingApproval | None, datetime]:
            return await unit.approvals.get_by_operation(status.operation_id), await unit.now()

        approval, now = await self.unit.read(look)
        what = self._what(approval) if approval else notices.escape(status.tool)
        data = {"operation_id": status.operation_id, "tool": status.tool, "status": status.status,
                "session_id": status.session_id, "result": status.result,
                "error": status.error.model_dump(mode="json") if status.error else None,
                "committed_at": status.committed_at.isoformat() if status.committed_at else None,
                "pending_id": approval.pending_id if approval else None}
        text = notices.finished(what, status.status, status.error.code if status.error else None)
        await self._store("operation.finished", status.operation_id, data.get("pending_id"),
                          body_of("operation.finished", status.committed_at or now, data, text))

    # --- helpers -----------------------------------------------------------------------------
    async def _record(self, event_type: str, key: str, pending_id: str, build, urls: list[str] | None = None
                      ) -> None:
        if not (urls or self.wants(event_type)):
            return
        approval = await self.unit.read(lambda unit: unit.approvals.get(pending_id))
        if approval is None:
            log.warning("%s for unknown approval %s ignored", event_type, pending_id)
            return
        built = await build(approval, approval.status)
        if built is None:
            return
        occurred_at, data, text = built
        body = json.dumps(data, separators=(",", ":")).encode() if urls else body_of(event_type, occurred_at, data,
                                                                                      text)
        await self._store(event_type, key, pending_id, body, urls)

    async def _store(self, event_type: str, key: str, pending_id: str | None, body: bytes,
                     urls: list[str] | None = None) -> None:
        added = await self.unit.run(lambda unit: unit.webhooks.add(
            event_id=event_id(event_type, key), event_type=event_type, pending_id=pending_id, body=body.decode(),
            urls=urls or self.wants(event_type)))
        if added:
            self.wake()

    def _url(self, approval: PendingApproval) -> str:
        return f"{self.public_url}/resume/{approval.pending_id}"

    @staticmethod
    def _what(approval: PendingApproval) -> str:
        return notices.subject(approval.tool, approval.arguments, approval.preview)

    def _data(self, approval: PendingApproval) -> dict[str, Any]:
        return {"pending_id": approval.pending_id, "call_id": approval.call_id, "session_id": approval.session_id,
                "tool": approval.tool, "operation_id": approval.operation_id, "arguments": approval.arguments,
                "preview": approval.preview, "required_roles": approval.required_roles,
                "requested_by": approval.requested_by, "expires_at": approval.expires_at.isoformat(),
                "status": approval.status, "approval_url": self._url(approval)}
