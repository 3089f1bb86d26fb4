"""May the person asking decide this approval now, and if not, why (the record's ``can_decide``).

Computed by the approval service for the authenticated caller the gateway names (sub and roles from the
verified token), never from anything the agent sent. The checks and their order are those of
``approvals.decide``, so a page that offers Approve only when ``can_decide`` is true never shows a button
that would fail with 403: first the caller's roles, then separation of duties, then the approval's
state and deadline.
"""

from __future__ import annotations

from datetime import datetime

from erpilot_approval.domain.approvals import ApprovalError, PendingApproval, authorize
from erpilot_approval.domain.votes import vote_of

# A status other than pending, as the reason a decision is no longer possible.
_STATUS_REASONS = {"expired": "expired", "superseded": "superseded", "withdrawn": "withdrawn"}


def cannot_decide_reason(approval: PendingApproval, actor_sub: str, actor_roles: list[str],
                         now: datetime) -> str | None:
    """None when the actor may approve now; else ``role``, ``separation_of_duties``, ``already_decided``,
    ``expired``, ``superseded``, ``withdrawn`` or ``already_voted`` (the first that applies).

    ``separation_of_duties`` bars approving only: that person may still reject or cancel.
    """
    try:
        authorize(approval, "approve", actor_sub, actor_roles)
    except ApprovalError as error:
        return "role" if error.code == "forbidden" else error.code
    if approval.status != "pending":
        return _STATUS_REASONS.get(approval.status, "already_decided")
    if now >= approval.expires_at:
        return "expired"  # past the deadline, even if no sweeper has expired it yet
    if vote_of(approval.votes, actor_sub) is not None:
        return "already_voted"  # a quorum approval still waiting for others
    return None
