"""Standing approvals (SPEC §11, issue 34): "approve this session's refunds up to 50 € until Friday".

An approver or manager (the giver) approves in advance the writes of one tool in one session whose ledger preview
shows an amount within ``max_amount_minor`` (None: any amount the giver may decide), until ``until``. While one is
in force, a new approval it covers is approved at once, in the transaction that records it, by the vote of
``standing:<id>`` on behalf of the giver: exactly a delegate's vote (``delegation.Authority``), so every rule of a
decision holds for it through ``approvals.decide``:

- **the giver's authority as of the write**: the roles recorded at giving time that the giver still holds now per
  the people directory (the policy's ``[people]``, ``ERPILOT_ROLE_SOURCE``), as a delegation lends (``lent_roles``);
  they must be among the approval's required roles at its amount;
- **separation of duties applies to the giver**: a version the giver requested or edited waits for a person;
- **quorum**: the standing approval is one vote, the giver's (the giver may not vote again on that version); the
  other approvers still vote;
- a person's decision taken first stands, and an edited version (a person's new arguments) waits for a person.

Giving checks what the giver may decide (``give``): the tool is a write tool that the policy puts to approval,
and the giver holds one of its deciding roles at every amount up to the cap (403 ``standing_beyond_authority``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from erpilot_approval.domain.approvals import DecisionOutcome, PendingApproval, decide, preview_amount
from erpilot_approval.domain.delegation import DELEGABLE_ROLES, LONGEST, Delegation
from erpilot_approval.domain.errors import ApprovalError
from erpilot_approval.domain.people import Directory
from erpilot_approval.domain.policy import Policy
from erpilot_contracts.tools.v1 import TOOLS, ToolKind

PREFIX = "standing:"


class StandingError(ApprovalError):
    """A refused standing approval, with the error code and the HTTP status the gateway answers with."""


@dataclass(frozen=True)
class StandingApproval:
    """``giver`` approves in advance ``tool`` in ``session_id`` up to ``max_amount_minor`` until ``until``."""

    standing_id: str
    giver: str
    roles: tuple[str, ...]  # the giver's deciding roles when giving: what its vote decides with (at most)
    session_id: str
    tool: str
    max_amount_minor: int | None
    until: datetime
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def decider(self) -> str:
        """The ``decided_by`` of what it approves."""
        return PREFIX + self.standing_id

    def in_force(self, now: datetime) -> bool:
        return self.revoked_at is None and now < self.until

    def covers(self, approval: PendingApproval, now: datetime) -> bool:
        """In force, for this session and tool, and the ledger's amount within the cap (a capped standing approval
        never covers a preview that shows no amount: what it would let through is unknown)."""
        if not self.in_force(now) or (approval.session_id, approval.tool) != (self.session_id, self.tool):
            return False
        if self.max_amount_minor is None:
            return True
        try:
            amount = preview_amount(approval.preview)
        except ApprovalError:
            return False
        return amount is not None and amount <= self.max_amount_minor


def give(standing_id: str, *, giver: str, giver_roles: Sequence[str], session_id: str, tool: str,
         max_amount_minor: int | None, until: datetime, now: datetime, policy: Policy) -> StandingApproval:
    """A new standing approval, or ``StandingError``: 422 ``unknown_tool``, ``not_a_write_tool``,
    ``approval_not_required`` (the policy allows or denies the tool), ``invalid_amount`` (negative cap),
    ``standing_in_past``, ``standing_too_long`` (over 90 days, as delegations); 403 ``standing_beyond_authority``
    when the giver holds none of the roles that may decide the tool at some amount up to the cap."""
    spec = TOOLS.get(tool)
    if spec is None:
        raise StandingError("unknown_tool", 422, f"no tool named {tool!r}")
    if spec.kind is not ToolKind.WRITE:
        raise StandingError("not_a_write_tool", 422, f"{tool} is not a write tool: nothing to approve")
    tool_policy = policy.for_tool(tool)
    if tool_policy.action != "require_approval":
        raise StandingError("approval_not_required", 422, f"the policy {tool_policy.action}s {tool}: no approval")
    if max_amount_minor is not None and (type(max_amount_minor) is not int or max_amount_minor < 0):
        raise StandingError("invalid_amount", 422, "max_amount_minor is a whole number of minor units, 0 or more")
    if until.tzinfo is None or now.tzinfo is None:
        raise ValueError("until and now must be timezone-aware")
    if until <= now:
        raise StandingError("standing_in_past", 422, f"until {until.isoformat()} is not in the future")
    if until - now > LONGEST:
        raise StandingError("standing_too_long", 422, f"until is at most {LONGEST.days} days ahead")
    roles = tuple(role for role in DELEGABLE_ROLES if role in giver_roles)
    for amount in _amounts_up_to(policy, tool, max_amount_minor):
        needed = tool_policy.required_roles(amount)
        if not any(role in needed for role in roles):
            shown = "" if amount is None else f" at {amount} minor units"
            raise StandingError("standing_beyond_authority", 403,
                                f"deciding {tool}{shown} needs one of the roles {needed}: yours do not")
    return StandingApproval(standing_id=standing_id, giver=giver, roles=roles, session_id=session_id, tool=tool,
                            max_amount_minor=max_amount_minor, until=until, created_at=now)


def _amounts_up_to(policy: Policy, tool: str, cap: int | None) -> list[int | None]:
    """Every amount tier the cap reaches: no amount, and each amount rule's threshold up to the cap (no cap:
    all of them)."""
    rules = policy.for_tool(tool).rules
    return [None, *(rule.min_amount_minor for rule in rules if cap is None or rule.min_amount_minor <= cap)]


def lent_roles(standing: StandingApproval, people: Directory | None) -> tuple[str, ...]:
    """The recorded roles its giver still holds now per ``people`` (a giver it does not name: none); ``people``
    None (no directory configured): the recorded roles."""
    if people is None:
        return standing.roles
    held = people.get(standing.giver, ())
    return tuple(role for role in standing.roles if role in held)


def apply(approval: PendingApproval, standing: Sequence[StandingApproval], people: Directory | None,
          now: datetime) -> DecisionOutcome | None:
    """The vote of the first standing approval (oldest first) that covers the new approval and may approve it now,
    as ``approvals.decide`` records a delegate's; None when none may (the approval waits for a person)."""
    for candidate in standing:
        if not candidate.covers(approval, now):
            continue
        roles = lent_roles(candidate, people)
        if not roles:
            continue
        # The giver's authority lent to the standing approval's pseudo-person, for this decision only.
        lent = Delegation(delegation_id=candidate.standing_id, delegator=candidate.giver, delegate=candidate.decider,
                          roles=roles, tools=(candidate.tool,), until=candidate.until, created_at=candidate.created_at)
        try:
            return decide(approval, "approve", approval.fingerprint, candidate.decider, [], None, now, [lent])
        except ApprovalError:  # its giver may not decide this one (role at this amount, SoD, voted already)
            continue
    return None


def revoke(standing: StandingApproval | None, actor_sub: str, actor_roles: Sequence[str], now: datetime
           ) -> StandingApproval | None:
    """The revoked standing approval (None: already revoked). Its giver or an admin revokes it; for anyone else it
    is ``not_found`` 404, exactly like an unknown one."""
    if standing is None or (standing.giver != actor_sub and "admin" not in actor_roles):
        raise StandingError("not_found", 404, "standing approval not found")
    if standing.revoked_at is not None:
        return None
    return replace(standing, revoked_at=now)


def same_give(existing: StandingApproval, *, giver: str, session_id: str, tool: str, max_amount_minor: int | None,
              until: datetime) -> bool:
    """Whether a give names exactly the stored terms (a redelivery of it, not another give)."""
    return ((existing.giver, existing.session_id, existing.tool, existing.max_amount_minor, existing.until)
            == (giver, session_id, tool, max_amount_minor, until))
