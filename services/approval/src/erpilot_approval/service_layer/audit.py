"""What the audit log records (appended through the unit of work, in the transaction of the change itself),
and its signed checkpoints."""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.audit import Checkpoint
from erpilot_approval.domain.delegation import Delegation
from erpilot_approval.domain.standing import StandingApproval
from erpilot_approval.domain.standing_runs import StandingRun
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, AuditLog
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_platform.loops import every

log = logging.getLogger(__name__)
# The resolution's status -> the audited kind (a superseded version ended by an edit).
RESOLUTION_KINDS = {"approved": "decision", "rejected": "decision", "cancelled": "decision", "expired": "expiry",
                    "superseded": "edit", "withdrawn": "withdrawal"}


def _add(trail: AuditLog, kind: str, approval: PendingApproval | None, actor: str | None, data: dict, *,
         operation_id: str | None = None, once: bool = False) -> Awaitable[bool]:
    return trail.append(kind, pending_id=approval.pending_id if approval else None,
                        operation_id=operation_id or (approval.operation_id if approval else None), actor=actor,
                        data=data, once=once)


async def requested(trail: AuditLog, approval: PendingApproval) -> None:
    await _add(trail, "request", approval, approval.edited_by or approval.requested_by, {
        "call_id": approval.call_id, "session_id": approval.session_id, "tool": approval.tool,
        "arguments": approval.arguments, "fingerprint": approval.fingerprint,
        "required_roles": approval.required_roles, "approvals_required": approval.approvals_required,
        "rejections_to_reject": approval.rejections_to_reject, "requested_by": approval.requested_by,
        "expires_at": approval.expires_at.isoformat(),
        "supersedes": approval.supersedes, "policy_version": approval.policy_version})


async def voted(trail: AuditLog, approval: PendingApproval, vote: Vote) -> None:
    """A vote; a delegate's names for whom (``on_behalf_of``), the actor being the delegate."""
    await _add(trail, "vote", approval, vote.sub, {
        "action": vote.action, "role": vote.role, "fingerprint": vote.fingerprint, "comment": vote.comment,
        "approvals_received": approval.approvals_received, "approvals_required": approval.approvals_required,
        **({"on_behalf_of": vote.on_behalf_of} if vote.on_behalf_of else {})})


async def resolved(trail: AuditLog, approval: PendingApproval, grant: GrantV1 | None) -> None:
    kind = RESOLUTION_KINDS.get(approval.status, "decision")
    await _add(trail, kind, approval, approval.decided_by or ("system:expiry" if kind == "expiry" else None), {
        "status": approval.status, "fingerprint": approval.fingerprint, "comment": approval.comment,
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
        "superseded_by": approval.superseded_by,
        **({"on_behalf_of": approval.decided_on_behalf_of} if approval.decided_on_behalf_of else {})})
    if grant is not None:
        await _add(trail, "grant_issued", approval, grant.decided_by, {
            "fingerprint": grant.fingerprint, "decided_at": grant.decided_at.isoformat(),
            "stock_check": grant.stock_check, "signature": grant.signature})


async def escalated(trail: AuditLog, approval: PendingApproval) -> None:
    """An escalation: who may decide it from now on (``expires_at`` unchanged)."""
    await _add(trail, "escalation", approval, "system:escalation", {
        "escalated_to": approval.escalate_to, "required_roles": approval.required_roles,
        "escalated_at": approval.escalated_at.isoformat(), "expires_at": approval.expires_at.isoformat()})


async def delegation_given(trail: AuditLog, delegation: Delegation) -> None:
    await trail.append("delegation_given", pending_id=None, operation_id=None, actor=delegation.delegator,
                       data=_delegation_data(delegation))


async def delegation_revoked(trail: AuditLog, delegation: Delegation, *, by: str) -> None:
    """``by``: who revoked it, the delegator or an admin."""
    await trail.append("delegation_revoked", pending_id=None, operation_id=None, actor=by,
                       data=_delegation_data(delegation))


def _delegation_data(delegation: Delegation) -> dict:
    return {"delegation_id": delegation.delegation_id, "from": delegation.delegator, "to": delegation.delegate,
            "roles": list(delegation.roles), "tools": list(delegation.tools) if delegation.tools is not None else None,
            "until": delegation.until.isoformat(),
            "revoked_at": delegation.revoked_at.isoformat() if delegation.revoked_at else None}


async def standing_given(trail: AuditLog, standing: StandingApproval) -> None:
    await trail.append("standing_given", pending_id=None, operation_id=None, actor=standing.giver,
                       data=_standing_data(standing))


async def standing_revoked(trail: AuditLog, standing: StandingApproval, *, by: str) -> None:
    """``by``: who revoked it, the giver or an admin."""
    await trail.append("standing_revoked", pending_id=None, operation_id=None, actor=by,
                       data=_standing_data(standing))


def _standing_data(standing: StandingApproval) -> dict:
    return {"standing_id": standing.standing_id, "given_by": standing.giver, "session_id": standing.session_id,
            "tool": standing.tool, "max_amount_minor": standing.max_amount_minor, "roles": list(standing.roles),
            "until": standing.until.isoformat(),
            "revoked_at": standing.revoked_at.isoformat() if standing.revoked_at else None}


async def standing_withheld(trail: AuditLog, approval: PendingApproval, decider: str, run: StandingRun, reason: str,
                            *, limit: int) -> None:
    """A standing approval (``decider``) covered a call of a chat run but did not vote: the run ended, or standing
    approvals approved ``limit`` of its writes already (``domain.standing_runs``). The approval waits for a person."""
    await _add(trail, "standing_withheld", approval, decider, {
        "reason": reason, "run_id": run.run_id, "call_id": approval.call_id, "session_id": approval.session_id,
        "standing_approved": run.approved, "max_writes_per_run": limit,
        "run_ended_at": run.ended_at.isoformat() if run.ended_at else None})


async def run_ended(trail: AuditLog, run: StandingRun) -> None:
    """The owner ended a chat run: no standing approval approves a call of it any more."""
    await trail.append("run_ended", pending_id=None, operation_id=None, actor=run.ended_by, data={
        "session_id": run.session_id, "run_id": run.run_id, "standing_approved": run.approved,
        "ended_at": run.ended_at.isoformat() if run.ended_at else None})


async def operation_finished(trail: AuditLog, status: OperationStatusV1, approval: PendingApproval | None) -> None:
    """The ledger's outcome (``evt.erp.operation_finished``), once per operation; a commit consumed the grant."""
    error = status.error.model_dump(mode="json") if status.error else None
    await _add(trail, "commit_outcome", approval, None, {
        "tool": status.tool, "status": status.status, "error": error,
        "committed_at": status.committed_at.isoformat() if status.committed_at else None},
        operation_id=status.operation_id, once=True)
    if status.status == "committed" and approval is not None:
        await _add(trail, "grant_consumed", approval, None, {"fingerprint": approval.fingerprint},
                   operation_id=status.operation_id, once=True)


class CheckpointSigner:
    """Signs the chain's head every ``interval_seconds`` when it moved (every replica may; one row per head)."""

    def __init__(self, uow: ApprovalUnitOfWork, interval_seconds: float):
        self.unit, self.interval_seconds = uow, interval_seconds

    async def sign_once(self) -> Checkpoint | None:
        return await self.unit.run(lambda unit: unit.audit.checkpoint())

    async def run(self) -> None:
        await every(self.interval_seconds, self.sign_once, name="audit checkpoint")
