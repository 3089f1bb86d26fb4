"""``query.approval.get``, ``query.approval.list`` and ``query.approval.referring``: side-effect free reads."""

from __future__ import annotations

from datetime import datetime

from erpilot_approval.domain.approvals import PENDING_OR_DECIDED, PendingApproval
from erpilot_approval.domain.delegation import Delegation, scopes
from erpilot_approval.domain.permissions import can_view, may_decide
from erpilot_approval.service_layer.common import delegations_to, not_found
from erpilot_approval.service_layer.mapping import policy_view, record_for
from erpilot_approval.service_layer.ports import ListFilter, Ports, Work
from erpilot_contracts.approval.v1 import (
    ApprovalPageV1,
    ApprovalRecordV1,
    FindReferringApprovalV1,
    GetApprovalV1,
    ListApprovalsV1,
    PolicyQueryV1,
    PolicyViewV1,
    ReferringApprovalV1,
)
from erpilot_platform import cursors
from erpilot_platform.refusals import Refused

# Approvals looked at per question: a draft or an order is named by a few approvals (its versions, a cancel, a
# refund or two); the first the person may decide answers.
REFERRING_LOOKED_AT = 50


async def policy(query: PolicyQueryV1, ports: Ports) -> PolicyViewV1:
    """The policy in force, per tool."""
    return policy_view(ports.policy, query.tool)


async def get_approval(query: GetApprovalV1, ports: Ports) -> ApprovalRecordV1:
    """One approval with its decision.

    The record with its decision for whoever may decide it (in their own right or as a delegate), the
    requester, or an admin; else not_found."""
    actor = query.actor

    async def look(unit: Work) -> tuple[PendingApproval | None, datetime, list[Delegation]]:
        now = await unit.now()
        return await unit.approvals.get(query.pending_id), now, await delegations_to(unit, ports, actor.sub, now)

    approval, now, lent = await ports.unit.read(look)
    if approval is None or not (can_view(approval, actor.sub, actor.roles, lent, now) or "admin" in actor.roles):
        raise not_found(query.pending_id)  # "not yours" and "unknown" look the same (SPEC §5)
    return record_for(approval, actor.sub, actor.roles, now, lent)


async def list_approvals(query: ListApprovalsV1, ports: Ports) -> ApprovalPageV1:
    """Approvals this person may decide.

    Approvals the actor holds a required role for, in their own right or as a delegate in force (the
    delegator's roles, for the delegation's tools), newest first; ``status`` defaults to ``pending``; filtered by
    session, tool, requester and creation time; ``next_cursor`` when there may be more.

    Each item says whether this actor may decide it (``can_decide``, ``cannot_decide_reason``, ``can_decide_for``).
    """
    actor = query.actor
    try:
        before = cursors.decode(query.cursor) if query.cursor else None
    except cursors.BadCursor as exc:
        raise Refused(exc.code, str(exc), 422) from None
    where = ListFilter(session_id=query.session_id, tool=query.tool, requested_by=query.requested_by,
                       since=query.since, before=before)

    async def look(unit: Work) -> tuple[list[PendingApproval], datetime, list[Delegation]]:
        now = await unit.now()
        lent = await delegations_to(unit, ports, actor.sub, now)
        found = await unit.approvals.list_decidable(actor.roles, status=query.status or "pending", where=where,
                                                    limit=query.limit + 1, delegated=scopes(lent))
        return found, now, lent

    found, now, lent = await ports.unit.read(look)
    page = found[:query.limit]
    next_cursor = cursors.encode(page[-1].created_at, page[-1].pending_id) if len(found) > query.limit else None
    return ApprovalPageV1(items=[record_for(approval, actor.sub, actor.roles, now, lent) for approval in page],
                          next_cursor=next_cursor)


async def referring_approval(query: FindReferringApprovalV1, ports: Ports) -> ReferringApprovalV1:
    """An approval this person may decide naming a draft or order.

    One approval, pending or decided, whose arguments name one of the drafts or orders asked about and that the
    actor may decide (``may_decide``), else none: what lets an approver read the object an approval refers to."""
    actor = query.actor
    if not (query.draft_ids or query.order_ids):
        return ReferringApprovalV1()

    async def look(unit: Work) -> list[PendingApproval]:
        return await unit.approvals.naming(draft_ids=query.draft_ids, order_ids=query.order_ids, roles=actor.roles,
                                           statuses=PENDING_OR_DECIDED, limit=REFERRING_LOOKED_AT)

    found = next((approval for approval in await ports.unit.read(look) if may_decide(approval, actor.sub, actor.roles)),
                 None)
    return ReferringApprovalV1(pending_id=found.pending_id if found else None)
