"""What every approval use case shares: the messages it emits (with their audit rows), refusals, expiry on touch."""

from __future__ import annotations

import uuid
from datetime import datetime

from erpilot_approval.domain.approvals import ApprovalError, PendingApproval, expire
from erpilot_approval.domain.delegation import Delegation, answerable
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.mapping import has_votes, requested_event, resolved_event, voted_event
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.erp.v1 import CommitOperationV1
from erpilot_platform.refusals import Refused

EXPIRY_ACTOR = "system:expiry"


def new_pending_id() -> str:
    return f"pa_{uuid.uuid4().hex}"


def refused(error: ApprovalError) -> Refused:
    """The refusal to raise (or to raise after a unit of work that must still commit, e.g. an expiry)."""
    return Refused(error.code, error.message, error.http_status)


def not_found(pending_id: str) -> Refused:
    return Refused("not_found", f"approval {pending_id} not found", 404)


def commit_msg_id(operation_id: str) -> str:
    """The name of an operation's commit message (its ``Nats-Msg-Id`` begins with it; the ERP commits once
    per operation whatever arrives twice)."""
    return f"erp.commit.{operation_id}"


async def emit_requested(unit: Work, approval: PendingApproval) -> None:
    """``evt.approval.requested``, and the request in the audit log."""
    await unit.emit(subjects.APPROVAL_EVT_REQUESTED, requested_event(approval))
    await audit.requested(unit.audit, approval)


async def emit_resolved(unit: Work, approval: PendingApproval, grant: GrantV1 | None = None) -> None:
    """``evt.approval.resolved``: the decision, the grant when approved, the comment when there is one; and
    the decision (expiry, edit, withdrawal) and the grant's issue in the audit log.

    An approval also sends ``cmd.erp.commit`` with its grant, after the resolution (the agent records
    ``approval_resolved`` before the ledger's outcome can reach it): the commit leaves this transaction's
    outbox, so no decision is recorded without its commit, and none is sent without its decision.
    """
    await unit.emit(subjects.APPROVAL_EVT_RESOLVED, resolved_event(approval, grant))
    await audit.resolved(unit.audit, approval, grant)
    if grant is not None:
        await unit.emit(subjects.ERP_CMD_COMMIT, CommitOperationV1(operation_id=approval.operation_id, grant=grant),
                        msg_id=commit_msg_id(approval.operation_id))


async def emit_voted(unit: Work, approval: PendingApproval, vote: Vote) -> None:
    """``evt.approval.voted`` for a quorum approval (``approvals_required`` or ``rejections_to_reject`` > 1;
    where one vote decides, ``evt.approval.resolved`` tells it alone)."""
    if has_votes(approval):
        await unit.emit(subjects.APPROVAL_EVT_VOTED, voted_event(approval, vote))


async def delegations_to(unit: Work, ports: Ports, actor_sub: str, now: datetime, *, lock: bool = False
                         ) -> list[Delegation]:
    """The delegations in force to this person now, each lending what its giver still holds now per the people
    directory (``delegation.answerable``): what they may decide as a delegate. ``lock`` holds them for a decision:
    a revocation then waits for it."""
    found = await unit.delegations.in_force([actor_sub], now, delegate_only=True, lock=lock)
    return answerable(found, ports.people())


async def expire_if_due(unit: Work, approval: PendingApproval, now: datetime) -> bool:
    """Expire a pending approval past its deadline (its row lock held), with its event; False if not due."""
    expired = expire(approval, now)
    if expired is None:
        return False
    await unit.approvals.save_outcome(expired)
    await unit.approvals.append_decision(expired.pending_id, actor=EXPIRY_ACTOR, action="expire",
                                         fingerprint=expired.fingerprint, comment=None, at=now)
    await emit_resolved(unit, expired)
    return True
