"""Quorum (M of N): each decision is a vote; an approval is approved when M distinct eligible people
approved the same fingerprint, rejected when ``rejections_to_reject`` distinct people rejected it (default:
the first reject), cancelled at the first cancel, expired at its deadline whatever the votes. Pure
functions, no I/O.

A person votes once per version: repeating the same vote is the recorded vote (it counts once), another
action after it is ``already_voted``. An edit makes a new version, which starts with no votes.

A delegate votes with a delegator's authority (``on_behalf_of``): each authority counts once, so a vote for
Bob and Bob's own vote are one vote (the second is ``already_voted``), and distinct people always means
distinct principals.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

# The roles in the order a voter's role is named (the first held that the approval requires).
ROLE_ORDER = ("manager", "approver", "admin", "requester")
MAX_APPROVALS_REQUIRED = 10


@dataclass(frozen=True)
class Vote:
    """One person's decision on one version: who, as which role, what, on which fingerprint, when, why."""

    sub: str
    role: str
    action: str
    fingerprint: str
    at: datetime
    comment: str | None = None
    on_behalf_of: str | None = None  # the delegator whose roles ``sub`` voted with (None: their own)

    @property
    def principal(self) -> str:
        """Whose authority this vote used: the delegator's, or the voter's own."""
        return self.on_behalf_of or self.sub


def vote_of(votes: Iterable[Vote], sub: str) -> Vote | None:
    """This person's vote, if they voted."""
    return next((vote for vote in votes if vote.sub == sub), None)


def vote_for(votes: Iterable[Vote], principal: str) -> Vote | None:
    """The vote that used this person's authority (theirs, or a delegate's for them), if any."""
    return next((vote for vote in votes if vote.principal == principal), None)


def approvals_received(votes: Iterable[Vote], fingerprint: str) -> int:
    """How many distinct authorities approved exactly this fingerprint."""
    return len({vote.principal for vote in votes if vote.action == "approve" and vote.fingerprint == fingerprint})


def rejections_received(votes: Iterable[Vote], fingerprint: str) -> int:
    """How many distinct authorities rejected exactly this fingerprint."""
    return len({vote.principal for vote in votes if vote.action == "reject" and vote.fingerprint == fingerprint})


def voting_role(required_roles: Iterable[str], actor_roles: Iterable[str]) -> str:
    """The role a voter decides as: the first required role they hold, in ``ROLE_ORDER``."""
    required, held = set(required_roles), {role for role in actor_roles if type(role) is str}
    return next((role for role in ROLE_ORDER if role in required and role in held), "")
