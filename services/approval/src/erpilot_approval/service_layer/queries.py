"""``query.approval.get`` and ``query.approval.list``: side-effect free reads."""

from __future__ import annotations

from erpilot_approval.domain.approvals import can_view
from erpilot_approval.service_layer.common import not_found
from erpilot_approval.service_layer.mapping import record_for
from erpilot_approval.service_layer.ports import ApprovalStore, ApprovalUnitOfWork, ListFilter
from erpilot_contracts.approval.v1 import GetApprovalV1, ListApprovalsV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform import cursors


async def get_approval(store: ApprovalStore, query: GetApprovalV1) -> ReplyV1:
    """The record with its decision for whoever may decide it, the requester, or an admin; else not_found."""
    async def look(uow: ApprovalUnitOfWork):
        return await uow.approvals.get(query.pending_id), await uow.now()

    approval, now = await store.read(look)
    actor = query.actor
    if approval is None or not (can_view(approval, actor.sub, actor.roles) or "admin" in actor.roles):
        return not_found(query.pending_id)  # "not yours" and "unknown" look the same (SPEC §5)
    return ReplyV1.success(record_for(approval, actor.sub, actor.roles, now))


async def list_approvals(store: ApprovalStore, query: ListApprovalsV1) -> ReplyV1:
    """Approvals the actor holds a required role for, newest first; ``status`` defaults to ``pending``;
    filtered by session, tool, requester and creation time; ``next_cursor`` when there may be more.

    Each item says whether this actor may decide it (``can_decide``, ``cannot_decide_reason``).
    """
    actor = query.actor
    try:
        before = cursors.decode(query.cursor) if query.cursor else None
    except cursors.BadCursor as exc:
        return ReplyV1.failure(exc.code, str(exc), 422)
    where = ListFilter(session_id=query.session_id, tool=query.tool, requested_by=query.requested_by,
                       since=query.since, before=before)

    async def look(uow: ApprovalUnitOfWork):
        found = await uow.approvals.list_decidable(actor.roles, status=query.status or "pending", where=where,
                                                   limit=query.limit + 1)
        return found, await uow.now()

    found, now = await store.read(look)
    page = found[:query.limit]
    next_cursor = cursors.encode(page[-1].created_at, page[-1].pending_id) if len(found) > query.limit else None
    return ReplyV1.success({"items": [record_for(approval, actor.sub, actor.roles, now).model_dump(mode="json")
                                      for approval in page], "next_cursor": next_cursor})
