"""What every approval use case shares: the events it emits (with their audit rows), refusals, expiry on touch."""

from __future__ import annotations

import uuid
from datetime import datetime

from erpilot_approval.domain.approvals import ApprovalError, PendingApproval, expire
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.mapping import has_votes, requested_event, resolved_event, voted_event
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.base import ReplyV1

EXPIRY_ACTOR = "system:expiry"


def new_pending_id() -> str:
    return f"pa_{uuid.uuid4().hex}"


def refused(error: ApprovalError) -> ReplyV1:
    return ReplyV1.failure(error.code, error.message, error.http_status)


def not_found(pending_id: str) -> ReplyV1:
    return ReplyV1.failure("not_found", f"approval {pending_id} not found", 404)


async def emit_requested(uow: ApprovalUnitOfWork, approval: PendingApproval) -> None:
    """``evt.approval.requested``, and the request in the audit log."""
    await uow.emit(subjects.APPROVAL_EVT_REQUESTED, requested_event(approval))
    await audit.requested(uow.audit, approval)


async def emit_resolved(uow: ApprovalUnitOfWork, approval: PendingApproval, grant: GrantV1 | None = None) -> None:
    """``evt.approval.resolved``: the decision, the grant when approved, the comment when there is one; and
    the decision (expiry, edit, withdrawal) and the grant's issue in the audit log."""
    await uow.emit(subjects.APPROVAL_EVT_RESOLVED, resolved_event(approval, grant))
    await audit.resolved(uow.audit, approval, grant)


async def emit_voted(uow: ApprovalUnitOfWork, approval: PendingApproval, vote: Vote) -> None:
    """``evt.approval.voted`` for a quorum approval (``approvals_required`` or ``rejections_to_reject`` > 1;
    where one vote decides, ``evt.approval.resolved`` tells it alone)."""
    if has_votes(approval):
        await uow.emit(subjects.APPROVAL_EVT_VOTED, voted_event(approval, vote))


async def expire_if_due(uow: ApprovalUnitOfWork, approval: PendingApproval, now: datetime) -> bool:
    """Expire a pending approval past its deadline (its row lock held), with its event; False if not due."""
    expired = expire(approval, now)
    if expired is None:
        return False
    await uow.approvals.save_outcome(expired)
    await uow.approvals.append_decision(expired.pending_id, actor=EXPIRY_ACTOR, action="expire",
                                        fingerprint=expired.fingerprint, comment=None, at=now)
    await emit_resolved(uow, expired)
    return True
