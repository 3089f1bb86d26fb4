"""Pending approvals and their decisions (SPEC §3.2-3.3, §5): pure functions of state, input and `now`.

Transitions return a new ``PendingApproval`` (nothing is mutated) or raise ``ApprovalError``; the
caller persists the result and emits events. ``expires_at`` is set once by ``new_pending`` and no
function here ever changes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from erpilot_approval.domain.delegation import Delegation, authorities
from erpilot_approval.domain.errors import ApprovalError
from erpilot_approval.domain.permissions import permitted, unused_authority
from erpilot_approval.domain.policy import Policy
from erpilot_approval.domain.policy_values import ROLES
from erpilot_approval.domain.votes import (
    Vote,
    approvals_received,
    rejections_received,
    vote_of,
    voting_role,
)
from erpilot_contracts.fingerprint import fingerprint as compute_fingerprint
from erpilot_contracts.tools.v1 import TOOLS, Risk

# The only accepted actions and the status each one leads to.
ACTION_STATUS = {"approve": "approved", "reject": "rejected", "cancel": "cancelled"}
# The approvals whose object (the draft or order their arguments name) a person who may decide them may read
# (SPEC §10): one waiting for a decision, or one decided; not one that expired, was withdrawn or superseded.
PENDING_OR_DECIDED = ("pending", *ACTION_STATUS.values())
HIGH_RISK_AMOUNT_MINOR = 1_000_000


@dataclass(frozen=True)
class ApprovalRequest:
    """What a caller asks a decision on: one prepared operation of one tool call (``cmd.approval.request``)."""

    call_id: str
    session_id: str
    tool: str
    tool_schema_version: int
    arguments: dict[str, Any]
    fingerprint: str
    operation_id: str
    preview: dict[str, Any]
    requested_by: str
    agent_reason: str | None = None  # the agent's words on why (its claim: shown, never relied on)


@dataclass(frozen=True)
class PendingApproval:
    """An approval and, once decided, its decision (the service layer maps it to ``ApprovalRecordV1``)."""

    pending_id: str
    call_id: str
    session_id: str
    tool: str
    tool_schema_version: int
    arguments: dict[str, Any]
    fingerprint: str
    operation_id: str
    risk: str
    preview: dict[str, Any]
    required_roles: list[str]
    requested_by: str
    created_at: datetime
    expires_at: datetime
    status: str
    policy_version: str
    separation_of_duties: bool = False
    decided_by: str | None = None
    decided_at: datetime | None = None
    comment: str | None = None
    superseded_by: str | None = None
    supersedes: str | None = None
    stock_check: str | None = None  # submit_order only: the policy's stock re-check, carried by the grant
    edited_by: str | None = None  # who made this version by an edit (None: the requester's own version)
    editors: tuple[str, ...] = ()  # everyone who edited a version of this call up to this one, oldest first
    approvals_required: int = 1  # quorum: distinct approvers needed (policy, fixed when the version is stored)
    votes: tuple[Vote, ...] = ()  # every vote on this version, oldest first
    rejections_to_reject: int = 1  # distinct rejecters that end it rejected (policy, fixed when stored)
    decided_on_behalf_of: str | None = None  # the delegator whose roles ``decided_by`` decided with
    escalate_to: str | None = None  # policy escalate_to: the role it gains if still undecided at ``escalate_at``
    escalate_at: datetime | None = None  # created_at + policy escalate_after, fixed when stored (None: never)
    escalated_at: datetime | None = None  # when ``escalate_to`` joined ``required_roles`` (once)
    agent_reason: str | None = None  # the agent's words on why it asks (shown as "the agent says"; decides nothing)

    @property
    def approvals_received(self) -> int:
        return approvals_received(self.votes, self.fingerprint)

    @property
    def parties(self) -> frozenset[str]:
        """Everyone who shaped this version: the requester and every editor in its chain."""
        return frozenset((self.requested_by, *self.editors))


@dataclass(frozen=True)
class DecisionOutcome:
    """``is_new``: persist ``vote`` (and, when ``ended``, the new status) and emit events; otherwise it is
    the recorded earlier vote or decision."""

    approval: PendingApproval
    is_new: bool
    vote: Vote | None = None

    @property
    def ended(self) -> bool:
        """The vote left ``pending``: quorum reached, a reject, a cancel."""
        return self.is_new and self.approval.status != "pending"


def new_pending(
    request: ApprovalRequest, policy: Policy, now: datetime, pending_id: str, supersedes: str | None = None
) -> PendingApproval:
    """Apply the policy to a request: required roles, risk, and a deadline fixed once at ``now + ttl``."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    tool_policy = policy.for_tool(request.tool)
    if tool_policy.action == "deny":
        raise ApprovalError("policy_denied", 403, f"the policy denies {request.tool!r}")
    if tool_policy.action != "require_approval":
        raise ApprovalError("approval_not_required", 409, f"the policy allows {request.tool!r} as is")
    expected = compute_fingerprint(request.tool, request.tool_schema_version, request.arguments)
    if request.fingerprint != expected:
        raise ApprovalError("invalid_request", 422, "fingerprint does not match tool, version and arguments")
    amount = preview_amount(request.preview)
    escalation = tool_policy.escalation_for(amount)
    return PendingApproval(
        pending_id=pending_id,
        call_id=request.call_id,
        session_id=request.session_id,
        tool=request.tool,
        tool_schema_version=request.tool_schema_version,
        arguments=request.arguments,
        fingerprint=request.fingerprint,
        operation_id=request.operation_id,
        risk=risk_of(request.tool, amount),
        preview=request.preview,
        required_roles=tool_policy.required_roles(amount),
        requested_by=request.requested_by,
        created_at=now,
        expires_at=now + tool_policy.ttl,
        status="pending",
        policy_version=policy.version,
        separation_of_duties=tool_policy.separation_of_duties,
        supersedes=supersedes,
        stock_check=tool_policy.stock_check,
        approvals_required=tool_policy.approvals_required_for(amount),
        rejections_to_reject=tool_policy.rejections_to_reject_for(amount),
        escalate_to=escalation[1] if escalation else None,
        escalate_at=now + escalation[0] if escalation else None,
        agent_reason=request.agent_reason,
    )


def preview_amount(preview: dict[str, Any]) -> int | None:
    """The preview's ``amount_minor``; a malformed one is refused, never read as "no amount"."""
    amount = preview.get("amount_minor")
    if amount is not None and type(amount) is not int:
        # Treating it as absent would silently drop an amount rule's stricter roles.
        raise ApprovalError("invalid_request", 422, f"preview.amount_minor is not an integer: {amount!r}")
    return amount


def risk_of(tool: str, amount_minor: int | None) -> str:
    """The tool's ``default_risk`` (high: money leaves; medium: any other write; low: reads and drafts), raised to
    high by a large amount."""
    spec = TOOLS.get(tool)
    if amount_minor is not None and amount_minor >= HIGH_RISK_AMOUNT_MINOR:
        return Risk.HIGH.value
    return spec.traits.default_risk.value if spec is not None else Risk.LOW.value


def decide(
    approval: PendingApproval,
    action: object,
    fingerprint: object,
    actor_sub: str,
    actor_roles: list[str],
    comment: str | None,
    now: datetime,
    delegations: Sequence[Delegation] = (),
) -> DecisionOutcome:
    """Record a vote (and the decision it makes), or return the recorded one when the person repeats it.

    Checks run in this order, the first failure wins:
    1. invalid_action 422: ``action`` is not exactly one of the three strings;
    2. authorisation (``permissions.permitted``), in the actor's own right or as a delegate (``delegations`` to
       the actor in force now for this tool): forbidden 403, then separation_of_duties 403 (every voter, and every
       delegator whose authority a voter would use);
    3. status: a repeat by the same person with the same action and fingerprint returns the
       recorded decision (even after the deadline); otherwise superseded / expired /
       already_decided 409;
    4. deadline: ``now >= expires_at`` is expired 409, even if no sweeper has run yet;
    5. fingerprint: anything but exactly the approval's fingerprint is stale_fingerprint 409;
    6. one vote per person and per authority: the same vote again is the recorded one; another, or a vote with
       an authority already used (Bob's own vote and Ana's for Bob), is already_voted 409.
    Authorisation comes first so a person without the role learns nothing about the approval's state.
    The actor decides in their own right when they may, else for the first delegator (by name) whose authority
    is still unused. An approve ends the approval only when it is the ``approvals_required``-th distinct one, a
    reject only when it is the ``rejections_to_reject``-th (default 1: at once); a cancel ends it at once.
    """
    if type(action) is not str or action not in ACTION_STATUS:
        raise ApprovalError("invalid_action", 422, "action must be exactly 'approve', 'reject' or 'cancel'")
    capacities = permitted(approval, action, actor_sub,
                           authorities(actor_sub, actor_roles, delegations, approval.tool, now))
    status = ACTION_STATUS[action]
    mine = vote_of(approval.votes, actor_sub)
    if approval.status != "pending":
        voted_so = mine.action == action if mine is not None else approval.decided_by == actor_sub
        if approval.status == status and voted_so:
            check_fingerprint(approval, fingerprint)
            return DecisionOutcome(approval, is_new=False)
        refuse_not_pending(approval)
    check_deadline(approval, now)
    check_fingerprint(approval, fingerprint)
    if mine is not None:
        if mine.action == action:
            return DecisionOutcome(approval, is_new=False)  # counted once
        raise ApprovalError("already_voted", 409, f"you voted {mine.action} on this approval already")
    authority = unused_authority(approval, actor_sub, capacities)
    vote = Vote(sub=actor_sub, role=voting_role(approval.required_roles, authority.roles), action=action,
                fingerprint=approval.fingerprint, at=now, comment=comment, on_behalf_of=authority.on_behalf_of)
    voted = replace(approval, votes=(*approval.votes, vote))
    if not _vote_ends(voted, action):
        return DecisionOutcome(voted, is_new=True, vote=vote)
    decided = replace(voted, status=status, decided_by=actor_sub, decided_at=now, comment=comment,
                      decided_on_behalf_of=authority.on_behalf_of)
    return DecisionOutcome(decided, is_new=True, vote=vote)


def _vote_ends(voted: PendingApproval, action: str) -> bool:
    """Whether the vote just counted ends the approval: its quorum of approves or of rejects, or a cancel."""
    if action == "approve":
        return voted.approvals_received >= voted.approvals_required
    if action == "reject":
        return rejections_received(voted.votes, voted.fingerprint) >= voted.rejections_to_reject
    return True


def expire(approval: PendingApproval, now: datetime) -> PendingApproval | None:
    """The expired approval when it is pending and its deadline has passed, else None (nothing to do).

    ``decided_at`` is the deadline itself, so every replica's sweeper records the same value.
    """
    if approval.status != "pending" or now < approval.expires_at:
        return None
    return replace(approval, status="expired", decided_at=approval.expires_at)


def escalate(approval: PendingApproval, now: datetime) -> PendingApproval | None:
    """The escalated approval: ``escalate_to`` joins ``required_roles`` (in role order) and ``escalated_at`` is
    ``now``; None when there is nothing to do: not pending (a decision stands), escalated already (once), no
    escalation in its policy, its time not come, or its deadline passed (it expires instead). ``expires_at`` is
    never touched: escalation neither shortens nor extends the deadline."""
    if (approval.status != "pending" or approval.escalated_at is not None or approval.escalate_at is None
            or approval.escalate_to is None or now < approval.escalate_at or now >= approval.expires_at):
        return None
    roles = [role for role in ROLES if role in approval.required_roles or role == approval.escalate_to]
    roles += [role for role in approval.required_roles if role not in roles]  # none today: a role outside ROLES
    return replace(approval, required_roles=roles, escalated_at=now)


def refuse_not_pending(approval: PendingApproval) -> None:
    if approval.status == "superseded":
        raise ApprovalError("superseded", 409, f"replaced by {approval.superseded_by}")
    if approval.status == "expired":
        raise ApprovalError("expired", 409, "the approval expired")
    raise ApprovalError("already_decided", 409, f"already {approval.status} by {approval.decided_by}")


def check_deadline(approval: PendingApproval, now: datetime) -> None:
    if now >= approval.expires_at:
        raise ApprovalError("expired", 409, f"the approval expired at {approval.expires_at.isoformat()}")


def check_fingerprint(approval: PendingApproval, fingerprint: object) -> None:
    # `type(...) is str` first: a str subclass or an object with a permissive __eq__ must not pass.
    if type(fingerprint) is not str or fingerprint != approval.fingerprint:
        raise ApprovalError("stale_fingerprint", 409, "the fingerprint differs from the approval's")
