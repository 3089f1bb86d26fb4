"""What every approval use case shares: its dependencies, the events it emits, refusals, expiry on touch."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_approval.adapters import repository
from erpilot_approval.adapters.erp import ErpClient
from erpilot_approval.domain.approvals import ApprovalError, PendingApproval, expire
from erpilot_approval.domain.policy import Policy
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer.audit import AuditTrail
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import ApprovalRequestedV1, ApprovalResolvedV1, ApprovalVotedV1, GrantV1, VoteV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform.outbox import Outbox

EXPIRY_ACTOR = "system:expiry"


@dataclass(frozen=True)
class Deps:
    engine: AsyncEngine
    outbox: Outbox
    policy: Policy
    signing_key: Ed25519PrivateKey
    erp: ErpClient
    audit: AuditTrail
    new_deadline: Callable[[], None] = lambda: None  # wakes the expiry sweeper after a new approval commits


def new_pending_id() -> str:
    return f"pa_{uuid.uuid4().hex}"


def refused(error: ApprovalError) -> ReplyV1:
    return ReplyV1.failure(error.code, error.message, error.http_status)


def not_found(pending_id: str) -> ReplyV1:
    return ReplyV1.failure("not_found", f"approval {pending_id} not found", 404)


async def emit_requested(conn: AsyncConnection, outbox: Outbox, approval: PendingApproval, *,
                         audit: AuditTrail) -> None:
    """``evt.approval.requested``, and the request in the audit log."""
    await outbox.add(conn, subjects.APPROVAL_EVT_REQUESTED, ApprovalRequestedV1(record=approval.to_record()))
    await audit.requested(conn, approval)


async def emit_resolved(conn: AsyncConnection, outbox: Outbox, approval: PendingApproval,
                        grant: GrantV1 | None = None, *, audit: AuditTrail) -> None:
    """``evt.approval.resolved``: the decision, the grant when approved, the comment when there is one; and
    the decision (expiry, edit, withdrawal) and the grant's issue in the audit log."""
    event = ApprovalResolvedV1(
        pending_id=approval.pending_id, call_id=approval.call_id, session_id=approval.session_id,
        operation_id=approval.operation_id, status=approval.status, decided_by=approval.decided_by,
        decided_at=approval.decided_at, comment=approval.comment, grant=grant,
        superseded_by=approval.superseded_by,
        **({"approvals_required": approval.approvals_required,
            "votes": [VoteV1(**vote.to_wire()) for vote in approval.votes]} if _has_votes(approval) else {}),
    )
    await outbox.add(conn, subjects.APPROVAL_EVT_RESOLVED, event)
    await audit.resolved(conn, approval, grant)


async def emit_voted(conn: AsyncConnection, outbox: Outbox, approval: PendingApproval, vote: Vote) -> None:
    """``evt.approval.voted`` for a quorum approval (``approvals_required`` or ``rejections_to_reject`` > 1;
    where one vote decides, ``evt.approval.resolved`` tells it alone)."""
    if not _has_votes(approval):
        return
    event = ApprovalVotedV1(
        pending_id=approval.pending_id, call_id=approval.call_id, session_id=approval.session_id,
        operation_id=approval.operation_id, vote=VoteV1(**vote.to_wire()), status=approval.status,
        approvals_required=approval.approvals_required, approvals_received=approval.approvals_received)
    await outbox.add(conn, subjects.APPROVAL_EVT_VOTED, event)


def _has_votes(approval: PendingApproval) -> bool:
    """A quorum approval: one vote may not decide it, so each vote is an event of its own."""
    return approval.approvals_required > 1 or approval.rejections_to_reject > 1


async def expire_if_due(conn: AsyncConnection, outbox: Outbox, approval: PendingApproval, now, *,
                        audit: AuditTrail) -> bool:
    """Expire a pending approval past its deadline (its row lock held), with its event; False if not due."""
    expired = expire(approval, now)
    if expired is None:
        return False
    await repository.save_outcome(conn, expired)
    await repository.append_decision(conn, expired.pending_id, actor=EXPIRY_ACTOR, action="expire",
                                     fingerprint=expired.fingerprint, comment=None, at=now)
    await emit_resolved(conn, outbox, expired, audit=audit)
    return True
