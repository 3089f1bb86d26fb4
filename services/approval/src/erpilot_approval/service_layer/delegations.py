"""``cmd.approval.delegate``, ``cmd.approval.revoke_delegation`` and ``query.approval.delegations`` (SPEC §10).

The gateway sends them for the authenticated person (``actor``: sub and roles from the verified token) and is the
only service allowed to (NATS permissions: decision-like subjects). Giving and revoking are each one unit of
work with their audit row. Gives run one at a time (``serialise_gives``), so two that together would form a chain
cannot both pass the check. A redelivered give finds its ``delegation_id`` and answers what was stored.
"""

from __future__ import annotations

from erpilot_approval.domain import delegation as domain
from erpilot_approval.domain.delegation import Delegation, DelegationError
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.common import refused
from erpilot_approval.service_layer.mapping import delegation_record
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_contracts.approval.v1 import (
    DelegationPageV1,
    DelegationV1,
    GiveDelegationV1,
    ListDelegationsV1,
    RevokeDelegationV1,
)
from erpilot_platform.refusals import Refused


def _repeat(existing: Delegation, cmd: GiveDelegationV1) -> DelegationV1:
    """The stored delegation for a repeated give (a redelivery); another give under its id is a conflict."""
    if not domain.same_give(existing, delegator=cmd.actor.sub, delegate=cmd.to, until=cmd.until, tools=cmd.tools):
        raise Refused("idempotency_conflict", f"delegation {cmd.delegation_id} was given with other terms", 409)
    return delegation_record(existing)


async def give_delegation(cmd: GiveDelegationV1, ports: Ports) -> DelegationV1:
    """An approver or manager lets another person decide with their roles until a time (idempotent by delegation_id).

    A new delegation from the actor to ``cmd.to`` (refusals: ``domain.delegation.give``), with its audit row."""

    async def work(unit: Work) -> DelegationV1:
        await unit.delegations.serialise_gives()
        existing = await unit.delegations.get(cmd.delegation_id)
        if existing is not None:
            return _repeat(existing, cmd)
        now = await unit.now()
        in_force = await unit.delegations.in_force([cmd.actor.sub, cmd.to], now)
        try:
            given = domain.give(cmd.delegation_id, delegator=cmd.actor.sub, delegator_roles=cmd.actor.roles,
                                delegate=cmd.to, until=cmd.until, tools=cmd.tools, now=now, in_force=in_force)
        except DelegationError as error:
            raise refused(error) from None
        await unit.delegations.add(given)
        await audit.delegation_given(unit.audit, given)
        return delegation_record(given)

    return await ports.unit.run(work)


async def revoke_delegation(cmd: RevokeDelegationV1, ports: Ports) -> DelegationV1:
    """The delegator ends a delegation now.

    The delegator or an admin ends it now (again: the recorded revocation); anyone else: 404, as for an unknown
    one."""

    async def work(unit: Work) -> DelegationV1:
        found = await unit.delegations.get(cmd.delegation_id, lock=True)  # waits for decisions that use it
        now = await unit.now()
        try:
            revoked = domain.revoke(found, cmd.actor.sub, cmd.actor.roles, now)
        except DelegationError as error:
            raise refused(error) from None
        if revoked is None:
            return delegation_record(found)
        await unit.delegations.save_revocation(revoked)
        await audit.delegation_revoked(unit.audit, revoked, by=cmd.actor.sub)
        return delegation_record(revoked)

    return await ports.unit.run(work)


async def list_delegations(query: ListDelegationsV1, ports: Ports) -> DelegationPageV1:
    """A person's delegations in force, given and received.

    The actor's delegations in force, given and received, newest first."""

    async def look(unit: Work) -> list[Delegation]:
        return await unit.delegations.in_force([query.actor.sub], await unit.now())

    found = await ports.unit.read(look)
    newest_first = sorted(found, key=lambda d: (d.created_at, d.delegation_id), reverse=True)
    return DelegationPageV1(items=[delegation_record(d) for d in newest_first])
