"""Delegation (SPEC §10): "my approvals go to Ana until Friday". Pure functions of state, input and ``now``.

A delegation lets its delegate decide with the delegator's deciding roles (``DELEGABLE_ROLES`` the delegator's
token held when giving it) for its tools (None: every write tool) until ``until``, unless it is revoked first.
It covers decisions (approve, reject, cancel), never edits, and nothing beyond approvals (no audit log, no
back office).

**One hop, no chains.** A delegate decides with the delegator's *own* roles only: a delegation never carries
what its delegator holds as someone else's delegate (``authorities`` never follows two delegations). Giving is
also refused (422 ``delegation_chain``) when it would make one person at the same time a delegate and a
delegator of delegations in force, whichever came first:

- the giver holds a delegation in force (they decide for someone as their delegate), or
- the receiver has given a delegation in force (they are away and their approvals go to someone else).

Whatever the tools of either. Once the other delegation ends (revoked, or past its ``until``), giving is allowed.

**The giver's authority as of the decision** (SPEC §11): a delegation lends the roles recorded at giving time
that its giver still holds now, per the people directory (``people``: the policy's ``[people]`` table and the
``ERPILOT_ROLE_SOURCE`` file). A giver the directory does not name holds nothing: their delegations decide
nothing. Only where no directory is configured at all do the recorded roles stand alone (``answerable``).

**Revoking**: the giver, or an admin (a leaver's delegations end with one call each).

**Separation of duties applies to both people**: a decision on behalf of a delegator may approve only when
neither the delegate nor the delegator requested or edited the version (``permissions.permitted``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from erpilot_approval.domain.errors import ApprovalError
from erpilot_approval.domain.people import Directory
from erpilot_contracts.tools.v1 import TOOLS, ToolKind

# The roles a delegation carries: the ones that decide approvals. Admin powers (the audit log, the back office,
# seeing every approval) are the admin's own and never delegated.
DELEGABLE_ROLES = ("approver", "manager")
# A delegation is for an absence, not a standing arrangement: the longer it lasts, the likelier its giver's
# authority changed meanwhile (SPEC §11).
LONGEST = timedelta(days=90)
WRITE_TOOLS = tuple(name for name, spec in TOOLS.items() if spec.kind is ToolKind.WRITE)


class DelegationError(ApprovalError):
    """A refused delegation, with the error code and the HTTP status the gateway answers with."""


@dataclass(frozen=True)
class Delegation:
    """``delegate`` may decide with ``delegator``'s ``roles`` for ``tools`` (None: every write tool) until ``until``."""

    delegation_id: str
    delegator: str
    delegate: str
    roles: tuple[str, ...]
    tools: tuple[str, ...] | None
    until: datetime
    created_at: datetime
    revoked_at: datetime | None = None

    def in_force(self, now: datetime) -> bool:
        return self.revoked_at is None and now < self.until

    def covers(self, tool: str) -> bool:
        return tool in (self.tools if self.tools is not None else WRITE_TOOLS)


@dataclass(frozen=True)
class Authority:
    """A capacity in which a person decides: with their own roles (``on_behalf_of`` None), or with the roles a
    delegator lent them."""

    roles: tuple[str, ...]
    on_behalf_of: str | None = None

    def principal(self, actor_sub: str) -> str:
        """Whose authority a decision in this capacity uses (one vote each): the delegator's, or the actor's own."""
        return self.on_behalf_of or actor_sub


def give(delegation_id: str, *, delegator: str, delegator_roles: list[str], delegate: str, until: datetime,
         tools: list[str] | None, now: datetime, in_force: Sequence[Delegation]) -> Delegation:
    """A new delegation, or ``DelegationError``: 403 ``forbidden`` for a giver who holds no deciding role; 422
    ``delegation_to_self``, ``delegation_in_past``, ``delegation_too_long``, ``invalid_tools``,
    ``delegation_chain`` (see the module). ``in_force``: the delegations in force now that name either person."""
    roles = tuple(role for role in DELEGABLE_ROLES if role in delegator_roles)
    if not roles:
        raise DelegationError("forbidden", 403, f"only an {' or a '.join(DELEGABLE_ROLES)} may delegate")
    if delegate == delegator:
        raise DelegationError("delegation_to_self", 422, "a delegation goes to someone else")
    if until.tzinfo is None or now.tzinfo is None:
        raise ValueError("until and now must be timezone-aware")
    if until <= now:
        raise DelegationError("delegation_in_past", 422, f"until {until.isoformat()} is not in the future")
    if until - now > LONGEST:
        raise DelegationError("delegation_too_long", 422, f"until is at most {LONGEST.days} days ahead")
    covered = _tools(tools)
    check_no_chain(delegator, delegate, in_force, now)
    return Delegation(delegation_id=delegation_id, delegator=delegator, delegate=delegate, roles=roles,
                      tools=covered, until=until, created_at=now)


def check_no_chain(delegator: str, delegate: str, delegations: Sequence[Delegation], now: datetime) -> None:
    """``delegation_chain`` 422 when the giver is a delegate, or the receiver a delegator, of one in force."""
    for other in delegations:
        if not other.in_force(now):
            continue
        if other.delegate == delegator:
            raise DelegationError("delegation_chain", 422,
                                  f"you decide for {other.delegator} as their delegate until "
                                  f"{other.until.isoformat()}; a delegate may not delegate further")
        if other.delegator == delegate:
            raise DelegationError("delegation_chain", 422,
                                  f"{delegate} has delegated their approvals to {other.delegate} until "
                                  f"{other.until.isoformat()}; a delegation to them would be a chain")


def _tools(tools: list[str] | None) -> tuple[str, ...] | None:
    """The write tools named, in catalog order (None: every write tool, including any added later)."""
    if tools is None:
        return None
    if not tools:
        raise DelegationError("invalid_tools", 422, "tools is a non-empty list of write tools, or absent for all")
    wrong = [tool for tool in tools if tool not in WRITE_TOOLS]
    if wrong:
        raise DelegationError("invalid_tools", 422,
                              f"not write tools: {', '.join(map(repr, wrong))} (write tools: {', '.join(WRITE_TOOLS)})")
    return tuple(tool for tool in WRITE_TOOLS if tool in tools)


def revoke(delegation: Delegation | None, actor_sub: str, actor_roles: Sequence[str], now: datetime
           ) -> Delegation | None:
    """The revoked delegation (None: already revoked, nothing to change). Its giver or an admin revokes it; for
    anyone else it is ``not_found`` 404, exactly like an unknown one. Revoking one past its ``until`` records the
    revocation all the same."""
    if delegation is None or (delegation.delegator != actor_sub and "admin" not in actor_roles):
        raise DelegationError("not_found", 404, "delegation not found")
    if delegation.revoked_at is not None:
        return None
    return replace(delegation, revoked_at=now)


def answerable(delegations: Sequence[Delegation], people: Directory | None) -> list[Delegation]:
    """The delegations as their givers' authority stands now: each lends the recorded roles its giver still holds
    per ``people`` (a giver it does not name: none), and one left with no role is dropped. ``people`` None (no
    directory configured): the recorded roles, as given."""
    if people is None:
        return list(delegations)
    kept = []
    for delegation in delegations:
        held = people.get(delegation.delegator, ())
        roles = tuple(role for role in delegation.roles if role in held)
        if roles:
            kept.append(replace(delegation, roles=roles))
    return kept


def authorities(actor_sub: str, actor_roles: Sequence[str], delegations: Sequence[Delegation], tool: str,
                now: datetime) -> tuple[Authority, ...]:
    """Every capacity in which the actor may decide an approval of ``tool`` now: their own roles first, then one
    per delegator of a delegation in force to them covering the tool (its roles; several of one delegator:
    their union), in delegator order. Never more than one hop: a delegator's own delegations are not followed."""
    own = Authority(tuple(role for role in actor_roles if type(role) is str))
    lent: dict[str, set[str]] = {}
    for delegation in delegations:
        if (delegation.delegate == actor_sub and delegation.delegator != actor_sub and delegation.in_force(now)
                and delegation.covers(tool)):
            lent.setdefault(delegation.delegator, set()).update(delegation.roles)
    return (own, *(Authority(tuple(role for role in DELEGABLE_ROLES if role in roles), delegator)
                   for delegator, roles in sorted(lent.items())))


@dataclass(frozen=True)
class RoleScope:
    """Roles that reach the approvals of some tools only: what a delegation lends its delegate."""

    roles: tuple[str, ...]
    tools: tuple[str, ...]


def scopes(delegations: Sequence[Delegation]) -> tuple[RoleScope, ...]:
    """What the delegations lend, one scope each (duplicates dropped), for listing what a delegate may decide."""
    found = dict.fromkeys(RoleScope(d.roles, d.tools if d.tools is not None else WRITE_TOOLS) for d in delegations)
    return tuple(found)


def same_give(existing: Delegation, *, delegator: str, delegate: str, until: datetime,
              tools: list[str] | None) -> bool:
    """Whether a give names exactly the stored delegation's terms (a redelivery of it, not another give)."""
    try:
        covered = _tools(tools)
    except DelegationError:
        return False
    return (existing.delegator, existing.delegate, existing.until, existing.tools) == (delegator, delegate, until,
                                                                                      covered)
