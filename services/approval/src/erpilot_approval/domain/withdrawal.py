"""Withdrawal (SPEC §9): the session owner cancelled the run that asked, so its pending approval ends.

Pure functions of state, input and ``now``. A withdrawal and a decision are both taken under the
approval's row lock, so exactly one of them wins: a withdrawn approval can never be approved (and so
never gets a grant, which the ERP needs to commit), and an approved one is never withdrawn.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from erpilot_approval.domain.approvals import PendingApproval

WITHDRAWN = "withdrawn"


def may_withdraw(approval: PendingApproval, *, session_id: str, actor_sub: str) -> bool:
    """Only the requester withdraws, and only approvals of the session named in the cancel."""
    return approval.session_id == session_id and approval.requested_by == actor_sub


def withdraw(approval: PendingApproval, actor_sub: str, now: datetime) -> PendingApproval | None:
    """The withdrawn approval, or None when it is no longer pending (its outcome stands as it is).

    Past its deadline a pending approval is not withdrawn: it expired, and the caller records that.
    """
    if approval.status != "pending" or now >= approval.expires_at:
        return None
    return replace(approval, status=WITHDRAWN, decided_by=actor_sub, decided_at=now)
