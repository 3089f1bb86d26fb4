"""Who may decide an approval (SPEC §3.3, §10): the required roles, in a person's own right or as a delegate,
and separation of duties; who may see it. Pure functions of the approval and the person; ``approvals.decide``
and ``eligibility`` build on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from erpilot_approval.domain.delegation import Authority, Delegation, authorities
from erpilot_approval.domain.errors import ApprovalError
from erpilot_approval.domain.votes import vote_for

if TYPE_CHECKING:  # approvals.py builds on this module: the type only, no import cycle at run time
    from erpilot_approval.domain.approvals import PendingApproval


def unused_authority(approval: PendingApproval, actor_sub: str, capacities: tuple[Authority, ...]) -> Authority:
    """The first capacity whose authority nobody has voted with yet; else already_voted (one vote each)."""
    for authority in capacities:
        if vote_for(approval.votes, authority.principal(actor_sub)) is None:
            return authority
    first = capacities[0].principal(actor_sub)
    taken = vote_for(approval.votes, first)
    whose = "you" if first == actor_sub else first
    raise ApprovalError("already_voted", 409, f"{taken.sub} voted for {whose} on this approval already")


def permitted(approval: PendingApproval, action: str, actor_sub: str,
              candidates: tuple[Authority, ...]) -> tuple[Authority, ...]:
    """The capacities in which the actor may take ``action`` (in the order given); none: the most telling refusal.

    A capacity needs one of ``required_roles``. Under separation of duties no party to the version (its requester,
    any editor: ``PendingApproval.parties``) approves it, neither in their own right nor as someone's delegate, and
    no delegate approves for a delegator who is a party (a requester never reaches their own approval through a
    delegate). Rejecting and cancelling stay allowed to parties. Refused: separation_of_duties when some capacity
    held the role, else forbidden.
    """
    allowed, barred = [], None
    for authority in candidates:
        if not _holds_required_role(approval, list(authority.roles)):
            continue
        party = _barred_party(approval, action, actor_sub, authority)
        if party is None:
            allowed.append(authority)
        elif barred is None:
            barred = (party, authority)
    if allowed:
        return tuple(allowed)
    if barred is None:
        raise ApprovalError("forbidden", 403, f"deciding needs one of the roles {approval.required_roles}")
    party, authority = barred
    role = "requested" if party == approval.requested_by else "edited"
    who = "you" if party == actor_sub else party
    through = f" (you would approve for {authority.on_behalf_of})" if authority.on_behalf_of else ""
    barred_person = "you" if who == "you" else "their delegate"
    raise ApprovalError("separation_of_duties", 403,
                        f"{who} {role} this approval, so {barred_person} may not approve it{through}")


def _barred_party(approval: PendingApproval, action: str, actor_sub: str, authority: Authority) -> str | None:
    """Under SoD, the party (the actor, or the delegator they would approve for) barred from approving; else None."""
    if not approval.separation_of_duties or action != "approve":
        return None
    return next((who for who in (actor_sub, authority.on_behalf_of) if who is not None and who in approval.parties),
                None)


def authorize(approval: PendingApproval, action: str, actor_sub: str, actor_roles: list[str]) -> None:
    """forbidden unless the actor holds a required role; under SoD no party to the version may approve it.

    The parties are the requester and everyone who edited a version of the call (``PendingApproval.parties``):
    a person who changed the arguments shaped what would be approved, exactly like the requester. In the actor's
    own right only (edits): decisions also weigh delegations (``permitted``).
    """
    permitted(approval, action, actor_sub, (Authority(tuple(actor_roles)),))


def can_decide(
    approval: PendingApproval, actor_sub: str, actor_roles: list[str], action: str = "approve"
) -> bool:
    """Whether this person may take ``action`` on this approval in their own right (roles and SoD, not its status;
    ``eligibility.cannot_decide_reason`` also weighs delegations and the state)."""
    try:
        authorize(approval, action, actor_sub, actor_roles)
    except ApprovalError:
        return False
    return True


def may_decide(approval: PendingApproval, actor_sub: str, actor_roles: list[str]) -> bool:
    """Whether this person holds a say in the approval: some decision on it is theirs to take (a party under
    separation of duties may not approve, but may still reject or cancel), whatever its status now."""
    return can_decide(approval, actor_sub, actor_roles, action="reject")


def can_view(approval: PendingApproval, actor_sub: str, actor_roles: list[str],
             delegations: Sequence[Delegation] = (), now: datetime | None = None) -> bool:
    """A person holding a required role (in their own right, or as a delegate in force at ``now``), or the
    requester, may see the approval."""
    if _holds_required_role(approval, actor_roles) or actor_sub == approval.requested_by:
        return True
    if now is None:
        return False
    return any(_holds_required_role(approval, list(authority.roles))
               for authority in authorities(actor_sub, [], delegations, approval.tool, now)[1:])


def _holds_required_role(approval: PendingApproval, actor_roles: list[str]) -> bool:
    return any(type(role) is str and role in approval.required_roles for role in actor_roles)
