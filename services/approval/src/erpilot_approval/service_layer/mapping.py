"""Between the wire and the domain's dataclasses: the ledger's requests in; records, grants, votes, the events
that tell them and the policy view out.

The domain knows nothing of the contracts; this is the one place that translates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime

from erpilot_approval.domain.approvals import ApprovalRequest, PendingApproval
from erpilot_approval.domain.delegation import Delegation
from erpilot_approval.domain.eligibility import cannot_decide_reason, deciding_for
from erpilot_approval.domain.policy import Policy
from erpilot_approval.domain.votes import Vote
from erpilot_contracts.approval.v1 import (
    ApprovalEscalatedV1,
    ApprovalRecordV1,
    ApprovalRequestedV1,
    ApprovalResolvedV1,
    ApprovalVotedV1,
    DelegationV1,
    GrantV1,
    PolicyViewV1,
    RequestApprovalV1,
    ToolPolicyV1,
    VoteV1,
)

# Internal to the approval service, not part of the record.
_INTERNAL_FIELDS = {"separation_of_duties", "editors", "votes"}


def request_of(cmd: RequestApprovalV1) -> ApprovalRequest:
    """The domain keeps the preview as its JSON (fields a newer ledger added included); records read it back into
    ``PreviewV1``."""
    values = {f.name: getattr(cmd, f.name) for f in fields(ApprovalRequest)}
    return ApprovalRequest(**values | {"preview": cmd.preview.model_dump(mode="json")})


def policy_view(policy: Policy, tool: str | None = None) -> PolicyViewV1:
    """The answer to ``query.approval.policy`` (one tool, or all)."""
    items = []
    for name in [tool] if tool is not None else list(policy.tools):
        rules = policy.for_tool(name)
        items.append(ToolPolicyV1(
            tool=name, action=rules.action, roles=list(rules.roles), ttl_seconds=int(rules.ttl.total_seconds()),
            stock_check=rules.stock_check, approvals_required=rules.approvals_required,
            rejections_to_reject=rules.rejections_to_reject))
    return PolicyViewV1(version=policy.version, tools=items)


def vote_record(vote: Vote) -> VoteV1:
    """The record's ``votes`` item (SPEC §9: ``{sub, role, action, at, comment}``, §10: ``on_behalf_of``)."""
    return VoteV1(sub=vote.sub, role=vote.role, action=vote.action, at=vote.at, comment=vote.comment,
                  on_behalf_of=vote.on_behalf_of)


def record_of(approval: PendingApproval) -> ApprovalRecordV1:
    """The wire record (``separation_of_duties`` and ``editors`` are internal, not part of it)."""
    values = {f.name: getattr(approval, f.name) for f in fields(approval) if f.name not in _INTERNAL_FIELDS}
    return ApprovalRecordV1(**values, votes=[vote_record(vote) for vote in approval.votes],
                            approvals_received=approval.approvals_received)


def record_for(approval: PendingApproval, actor_sub: str, actor_roles: list[str], now: datetime,
               delegations: Sequence[Delegation] = ()) -> ApprovalRecordV1:
    """The wire record as this person sees it (``delegations``: those in force to them): with ``can_decide`` and,
    when false, the reason; when true, whom they would decide for as a delegate (``can_decide_for``)."""
    reason = cannot_decide_reason(approval, actor_sub, actor_roles, now, delegations)
    decides_for = deciding_for(approval, actor_sub, actor_roles, now, delegations) if reason is None else None
    return record_of(approval).model_copy(update={"can_decide": reason is None, "cannot_decide_reason": reason,
                                                  "can_decide_for": decides_for})


def delegation_record(delegation: Delegation) -> DelegationV1:
    return DelegationV1(delegation_id=delegation.delegation_id, from_=delegation.delegator, to=delegation.delegate,
                        until=delegation.until, roles=list(delegation.roles),
                        tools=list(delegation.tools) if delegation.tools is not None else None,
                        created_at=delegation.created_at, revoked_at=delegation.revoked_at)


def grant_for(approval: PendingApproval) -> GrantV1:
    """The unsigned grant of an approved approval (sign it with ``erpilot_platform.grants``)."""
    if approval.status != "approved" or approval.decided_by is None or approval.decided_at is None:
        raise ValueError(f"approval {approval.pending_id} is {approval.status}, not approved")
    return GrantV1(pending_id=approval.pending_id, operation_id=approval.operation_id,
                   fingerprint=approval.fingerprint, decided_by=approval.decided_by,
                   decided_at=approval.decided_at, stock_check=approval.stock_check)


def has_votes(approval: PendingApproval) -> bool:
    """A quorum approval: one vote may not decide it, so each vote is an event of its own."""
    return approval.approvals_required > 1 or approval.rejections_to_reject > 1


def requested_event(approval: PendingApproval) -> ApprovalRequestedV1:
    return ApprovalRequestedV1(record=record_of(approval))


def resolved_event(approval: PendingApproval, grant: GrantV1 | None) -> ApprovalResolvedV1:
    """The decision, the grant when approved, the comment when there is one (and the votes under a quorum)."""
    return ApprovalResolvedV1(
        pending_id=approval.pending_id, call_id=approval.call_id, session_id=approval.session_id,
        operation_id=approval.operation_id, status=approval.status, decided_by=approval.decided_by,
        decided_at=approval.decided_at, comment=approval.comment, grant=grant,
        superseded_by=approval.superseded_by, decided_on_behalf_of=approval.decided_on_behalf_of,
        **({"approvals_required": approval.approvals_required,
            "votes": [vote_record(vote) for vote in approval.votes]} if has_votes(approval) else {}),
    )


def voted_event(approval: PendingApproval, vote: Vote) -> ApprovalVotedV1:
    return ApprovalVotedV1(
        pending_id=approval.pending_id, call_id=approval.call_id, session_id=approval.session_id,
        operation_id=approval.operation_id, vote=vote_record(vote), status=approval.status,
        approvals_required=approval.approvals_required, approvals_received=approval.approvals_received)


def escalated_event(approval: PendingApproval) -> ApprovalEscalatedV1:
    return ApprovalEscalatedV1(
        pending_id=approval.pending_id, call_id=approval.call_id, session_id=approval.session_id,
        operation_id=approval.operation_id, tool=approval.tool, escalated_to=approval.escalate_to,
        required_roles=approval.required_roles, escalated_at=approval.escalated_at, expires_at=approval.expires_at)
