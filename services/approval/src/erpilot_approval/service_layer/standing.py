"""``cmd.approval.stand``, ``cmd.approval.revoke_standing``, ``query.approval.standing`` (SPEC §11, issue 34),
``cmd.approval.end_run``, and the one place a standing approval decides: ``approve_at_once``, in the transaction that
records a new approval. A chat run's writes are approved by standing approvals only until its owner ended the run
and up to the policy's ``[standing] max_writes_per_run`` (``domain.standing_runs``); beyond, they wait for a person.

The gateway sends the commands for the authenticated person (``actor``: sub and roles from the verified token)
and is the only service allowed to (NATS permissions: decision subjects). Giving and revoking are each one unit
of work with their audit row; a redelivered give finds its ``standing_id`` and answers what was stored.
"""

from __future__ import annotations

from datetime import datetime

from erpilot_approval.domain import standing as domain
from erpilot_approval.domain import standing_runs as runs
from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.standing import StandingApproval, StandingError
from erpilot_approval.domain.standing_runs import StandingRun
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.common import refused
from erpilot_approval.service_layer.decisions import store_vote
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_contracts.approval.standing import (
    EndRunV1,
    GiveStandingApprovalV1,
    ListStandingApprovalsV1,
    RevokeStandingApprovalV1,
    StandingApprovalPageV1,
    StandingApprovalV1,
    StandingRunV1,
)
from erpilot_platform import deliveries
from erpilot_platform.assertions import require_vouched
from erpilot_platform.refusals import Refused


def standing_record(standing: StandingApproval) -> StandingApprovalV1:
    return StandingApprovalV1(standing_id=standing.standing_id, given_by=standing.giver,
                              session_id=standing.session_id, tool=standing.tool,
                              max_amount_minor=standing.max_amount_minor, until=standing.until,
                              roles=list(standing.roles), created_at=standing.created_at,
                              revoked_at=standing.revoked_at)


async def standing_for(unit: Work, approval: PendingApproval, now: datetime) -> list[StandingApproval]:
    """The standing approvals in force for the approval's session and tool, held (shared) until the transaction
    ends: a revocation waits for this request, or came first and counts. Read before the request's audit row, so
    the locks come in a revocation's order (its row, then the audit chain) and the two never deadlock."""
    return await unit.standing.in_force(now, session_id=approval.session_id, tool=approval.tool, lock=True)


async def run_of(unit: Work, approval: PendingApproval, run_id: str | None,
                 found: list[StandingApproval]) -> StandingRun | None:
    """The row of the chat run ``run_id`` the request's assertion vouches for, held until the transaction ends, when
    a standing approval in force might approve it (None: a direct call, or nothing in force). Taken before the
    request's audit row, as ``standing_for``: an end of the run takes the same row, then the audit chain."""
    if run_id is None or not found:
        return None
    return await unit.standing.run(approval.session_id, run_id)


async def approve_at_once(unit: Work, ports: Ports, approval: PendingApproval, found: list[StandingApproval],
                          run: StandingRun | None, now: datetime) -> PendingApproval:
    """A new approval one of ``found`` covers gets its vote now, stored exactly as a person's decision
    (``decisions.store_vote``: the vote, the decision log, ``evt.approval.resolved`` and ``cmd.erp.commit`` with
    the signed grant, all in this transaction's outbox, after its ``evt.approval.requested``), unless it is a call
    of a chat run (``run``) that ended or had its ``max_writes_per_run``: then the audit log says which standing
    approval was withheld and why, and the approval waits for a person. Returns the approval as it stands
    (unchanged: none applies)."""
    outcome = domain.apply(approval, found, ports.people(), now)
    if outcome is None:
        return approval
    if run is not None:
        reason = runs.withheld(run, ports.policy.max_writes_per_run)
        if reason is not None:
            await audit.standing_withheld(unit.audit, approval, outcome.vote.sub, run, reason,
                                          limit=ports.policy.max_writes_per_run)
            return approval
        await unit.standing.save_run(runs.counted(run))
    await store_vote(unit, ports, outcome, action="approve", fingerprint=approval.fingerprint, comment=None,
                     now=now)
    return outcome.approval


async def record_run_end(unit: Work, session_id: str, run_id: str, *, by: str, now: datetime) -> StandingRun:
    """The run ended by ``by`` (its owner), with its audit row; a run already ended keeps its first end."""
    run = await unit.standing.run(session_id, run_id)
    ended = runs.end(run, by, now)
    if ended is None:
        return run
    await unit.standing.save_run(ended)
    await audit.run_ended(unit.audit, ended)
    return ended


def run_record(run: StandingRun) -> StandingRunV1:
    return StandingRunV1(session_id=run.session_id, run_id=run.run_id, standing_approved=run.approved,
                         ended_at=run.ended_at, ended_by=run.ended_by)


async def end_run(cmd: EndRunV1, ports: Ports, *, stored_at: datetime | None = None) -> StandingRunV1:
    """The owner cancelled a chat run (the gateway, with the cancel's assertion): standing approvals approve no call
    of it any more; they wait for a person.

    The assertion must be valid when JetStream stored the command (``stored_at``; default: the delivery being
    handled, ``deliveries.stored_at``): no standing approval approves a call of the run again. Idempotent."""
    require_vouched(cmd.assertion, ports.assertion_key, session_id=cmd.session_id, sub=cmd.owner, run_id=cmd.run_id,
                    at=stored_at or deliveries.stored_at())

    async def work(unit: Work) -> StandingRunV1:
        return run_record(await record_run_end(unit, cmd.session_id, cmd.run_id, by=cmd.owner, now=await unit.now()))

    return await ports.unit.run(work)


async def give_standing(cmd: GiveStandingApprovalV1, ports: Ports) -> StandingApprovalV1:
    """An approver or manager approves in advance one write tool in one session up to an amount until a time
    (idempotent by standing_id).

    A new standing approval from the actor (refusals: ``domain.standing.give``), with its audit row."""

    async def work(unit: Work) -> StandingApprovalV1:
        existing = await unit.standing.get(cmd.standing_id)
        if existing is not None:
            if not domain.same_give(existing, giver=cmd.actor.sub, session_id=cmd.session_id, tool=cmd.tool,
                                    max_amount_minor=cmd.max_amount_minor, until=cmd.until):
                raise Refused("idempotency_conflict", f"standing approval {cmd.standing_id} was given with other "
                                                      "terms", 409)
            return standing_record(existing)
        try:
            given = domain.give(cmd.standing_id, giver=cmd.actor.sub, giver_roles=cmd.actor.roles,
                                session_id=cmd.session_id, tool=cmd.tool, max_amount_minor=cmd.max_amount_minor,
                                until=cmd.until, now=await unit.now(), policy=ports.policy)
        except StandingError as error:
            raise refused(error) from None
        await unit.standing.add(given)
        await audit.standing_given(unit.audit, given)
        return standing_record(given)

    return await ports.unit.run(work)


async def revoke_standing(cmd: RevokeStandingApprovalV1, ports: Ports) -> StandingApprovalV1:
    """The giver (or an admin) ends a standing approval now.

    Its giver or an admin ends it now (again: the recorded revocation); anyone else: 404, as for an unknown one."""

    async def work(unit: Work) -> StandingApprovalV1:
        found = await unit.standing.get(cmd.standing_id, lock=True)  # waits for requests that use it
        try:
            revoked = domain.revoke(found, cmd.actor.sub, cmd.actor.roles, await unit.now())
        except StandingError as error:
            raise refused(error) from None
        if revoked is None:
            return standing_record(found)
        await unit.standing.save_revocation(revoked)
        await audit.standing_revoked(unit.audit, revoked, by=cmd.actor.sub)
        return standing_record(revoked)

    return await ports.unit.run(work)


async def list_standing(query: ListStandingApprovalsV1, ports: Ports) -> StandingApprovalPageV1:
    """The standing approvals in force a person gave (admins: all).

    The standing approvals in force the actor gave (an admin: everyone's), newest first."""
    giver = None if "admin" in query.actor.roles else query.actor.sub

    async def look(unit: Work) -> list[StandingApproval]:
        return await unit.standing.in_force(await unit.now(), giver=giver)

    found = await ports.unit.read(look)
    newest_first = sorted(found, key=lambda s: (s.created_at, s.standing_id), reverse=True)
    return StandingApprovalPageV1(items=[standing_record(s) for s in newest_first])
