"""May the person asking decide this approval now, and if not, why (the record's ``can_decide``).

Computed by the approval service for the authenticated caller the gateway names (sub and roles from the
verified token) and the delegations in force to them, never from anything the agent sent. The checks and their
order are those of ``approvals.decide``, so a page that offers Approve only when ``can_decide`` is true never
shows a button that would fail with 403: first the caller's roles (their own, or a delegator's), then separation
of duties (for both people), then the approval's state and deadline, then the one vote per person and authority.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from erpilot_approval.domain.approvals import ApprovalError, PendingApproval
from erpilot_approval.domain.delegation import Authority, Delegation, authorities
from erpilot_approval.domain.permissions import permitted, unused_authority
from erpilot_approval.domain.votes import vote_of

# A status other than pending, as the reason a decision is no longer possible.
_STATUS_REASONS = {"expired": "expired", "superseded": "superseded", "withdrawn": "withdrawn"}


def cannot_decide_reason(approval: PendingApproval, actor_sub: str, actor_roles: list[str],
                         now: datetime, delegations: Sequence[Delegation] = ()) -> str | None:
    """None when the actor may approve now (in their own right or as a delegate); else ``role``,
    ``separation_of_duties``, ``already_decided``, ``expired``, ``superseded``, ``withdrawn`` or ``already_voted``
    (the first that applies).

    ``separation_of_duties`` bars approving only: that person may still reject or cancel.
    """
    capacities = _capacities(approval, actor_sub, actor_roles, now, delegations)
    if isinstance(capacities, str):
        return capacities
    if approval.status != "pending":
        return _STATUS_REASONS.get(approval.status, "already_decided")
    if now >= approval.expires_at:
        return "expired"  # past the deadline, even if no sweeper has expired it yet
    if vote_of(approval.votes, actor_sub) is not None:
        return "already_voted"  # a quorum approval still waiting for others
    try:
        unused_authority(approval, actor_sub, capacities)
    except ApprovalError:
        return "already_voted"  # every authority they hold was voted with (a delegate voted for them)
    return None


def deciding_for(approval: PendingApproval, actor_sub: str, actor_roles: list[str], now: datetime,
                 delegations: Sequence[Delegation] = ()) -> str | None:
    """The delegator the actor would approve for now (None: in their own right, or they may not approve)."""
    capacities = _capacities(approval, actor_sub, actor_roles, now, delegations)
    if isinstance(capacities, str):
        return None
    try:
        return unused_authority(approval, actor_sub, capacities).on_behalf_of
    except ApprovalError:
        return None


def _capacities(approval: PendingApproval, actor_sub: str, actor_roles: list[str], now: datetime,
                delegations: Sequence[Delegation]) -> tuple[Authority, ...] | str:
    """The capacities in which the actor may approve, or the reason code when there is none."""
    try:
        return permitted(approval, "approve", actor_sub, authorities(actor_sub, actor_roles, delegations,
                                                                      approval.tool, now))
    except ApprovalError as error:
        return "role" if error.code == "forbidden" else error.code
