"""NATS endpoints of the approval service: each endpoint's handler, ``async def handle(msg, ports) -> reply``.

Commands and queries alike run on ``Ports`` (the queries read what ``ports.unit`` has committed). Each handler
returns its endpoint's reply model or raises ``Refused``; the ServiceBus builds the ``ReplyV1``; an event's
handler returns nothing. The first paragraph of a handler's docstring describes its endpoint (AsyncAPI).
"""

from __future__ import annotations

from erpilot_approval.service_layer import (
    audit_queries,
    bulk_decisions,
    chat,
    decisions,
    delegations,
    edits,
    email_links,
    queries,
    requests,
    standing,
    withdrawals,
)
from erpilot_approval.service_layer.ports import Ports
from erpilot_contracts import events
from erpilot_contracts import requests as endpoints
from erpilot_platform.batches import batched
from erpilot_platform.endpoints import ServiceBus

HANDLERS = {
    endpoints.APPROVAL_POLICY: queries.policy,
    # one unit of work after checks in memory: it shares a transaction with the requests in flight beside it
    endpoints.APPROVAL_REQUEST: batched(requests.request_approval),
    endpoints.APPROVAL_DECIDE: decisions.decide,
    endpoints.APPROVAL_EMAIL_LINK: email_links.email_link,
    endpoints.APPROVAL_DECIDE_BY_LINK: email_links.decide_by_link,
    endpoints.APPROVAL_CHAT_ACTION: chat.chat_action,
    endpoints.APPROVAL_DECIDE_MANY: bulk_decisions.decide_many,
    endpoints.APPROVAL_EDIT: edits.edit,
    events.AGENT_RUN_CANCELLED: withdrawals.withdraw_cancelled_run,
    endpoints.APPROVAL_GET: queries.get_approval,
    endpoints.APPROVAL_AUDIT: audit_queries.audit_rows,
    endpoints.APPROVAL_AUDIT_CHAIN: audit_queries.audit_chain,
    endpoints.APPROVAL_LIST: queries.list_approvals,
    endpoints.APPROVAL_REFERRING: queries.referring_approval,
    endpoints.APPROVAL_DELEGATE: delegations.give_delegation,
    endpoints.APPROVAL_REVOKE_DELEGATION: delegations.revoke_delegation,
    endpoints.APPROVAL_DELEGATIONS: delegations.list_delegations,
    endpoints.APPROVAL_STAND: standing.give_standing,
    endpoints.APPROVAL_REVOKE_STANDING: standing.revoke_standing,
    endpoints.APPROVAL_END_RUN: standing.end_run,
    endpoints.APPROVAL_STANDING: standing.list_standing,
}


def register(bus: ServiceBus, ports: Ports) -> None:
    bus.register(HANDLERS, ports)
