"""``req.approval.decide``: exactly one decision wins, decided under the row lock by the database clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from erpilot_approval.domain import approvals as domain
from erpilot_approval.domain.approvals import ApprovalError, DecisionOutcome, PendingApproval
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.common import (
    delegations_to,
    emit_resolved,
    emit_voted,
    expire_if_due,
    not_found,
    refused,
)
from erpilot_approval.service_layer.mapping import grant_for, record_for
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_contracts.approval.v1 import ApprovalRecordV1, DecideV1
from erpilot_platform.failpoints import failpoint
from erpilot_platform.grants import sign_grant
from erpilot_platform.refusals import Refused
from erpilot_platform.telemetry import decision_latency, step

Check = Callable[[PendingApproval, datetime], None]


async def store_vote(unit: Work, ports: Ports, outcome: DecisionOutcome, *, action: str,
                     fingerprint: str, comment: str | None, now: datetime) -> str | None:
    """Persist a new vote and, when it decides, the decision with its grant and messages (row lock held): an
    approval's ``evt.approval.resolved`` and then its ``cmd.erp.commit`` with the signed grant.

    Returns ``"decided"``, ``"voted"`` (a quorum approval still waiting) or None (a repeat: nothing new).
    """
    decided = outcome.approval
    if not outcome.is_new:
        return None
    await unit.approvals.append_vote(decided.pending_id, outcome.vote)
    await audit.voted(unit.audit, decided, outcome.vote)
    await emit_voted(unit, decided, outcome.vote)
    if not outcome.ended:
        return "voted"
    grant = sign_grant(grant_for(decided), ports.signing_key) if decided.status == "approved" else None
    await unit.approvals.save_outcome(decided, grant)
    await unit.approvals.append_decision(decided.pending_id, actor=outcome.vote.sub, action=action,
                                         fingerprint=fingerprint, comment=comment, at=now,
                                         on_behalf_of=outcome.vote.on_behalf_of)
    await emit_resolved(unit, decided, grant)
    return "decided"


def record_latency(record: ApprovalRecordV1) -> None:
    decision_latency.record((record.decided_at - record.created_at).total_seconds(),
                            {"tool": record.tool, "status": record.status})


async def decide(cmd: DecideV1, ports: Ports, *, check: Check | None = None) -> ApprovalRecordV1:
    """Approve, reject or cancel; exactly one decision wins; an approval signs the grant and sends cmd.erp.commit.

    One transaction: lock the row, read the clock, vote, and when the vote decides: sign, log, queue.

    Whoever takes the lock second sees the first decision (already_decided, or the recorded result
    when it is the same person repeating the same action). Under a quorum the votes are serialised by
    the same lock, so the grant is signed once, by the vote that reaches the quorum. A decision at or
    after ``expires_at`` is refused and expires the approval on the spot, even if no sweeper has run yet.
    The delegations in force to the decider are read (and held, shared) after the row lock, so a revocation
    either came first (and counts) or waits for this decision.
    ``check`` (an email link's: used, superseded, expired) runs under the row lock, by the database clock, before
    anything else is decided; it raises ``Refused`` to decide nothing.
    """

    async def work(unit: Work) -> tuple[ApprovalRecordV1 | Refused, str | None]:
        approval = await unit.approvals.get(cmd.pending_id, lock=True)
        if approval is None:
            raise not_found(cmd.pending_id)
        now = await unit.now()  # read after the lock: a wait for it counts against the deadline
        if check is not None:
            check(approval, now)
        lent = await delegations_to(unit, ports, cmd.actor.sub, now, lock=True)
        try:
            outcome = domain.decide(approval, cmd.action, cmd.fingerprint, cmd.actor.sub, cmd.actor.roles,
                                    cmd.comment, now, lent)
        except ApprovalError as error:
            if error.code == "expired" and await expire_if_due(unit, approval, now):
                return refused(error), "expired"  # the expiry commits; the refusal is answered after it
            raise refused(error) from None
        change = await store_vote(unit, ports, outcome, action=cmd.action, fingerprint=cmd.fingerprint,
                                  comment=cmd.comment, now=now)
        if change == "decided":
            failpoint("approval.decide.before_db_commit")  # grant signed, decision and messages written
        return record_for(outcome.approval, cmd.actor.sub, cmd.actor.roles, now, lent), change

    origin = await ports.unit.read(lambda unit: unit.approvals.trace_context(cmd.pending_id))
    # In the tool call's trace (stored with the request), linked to this decision's own request.
    with step("approval", "decide", resume=origin, pending_id=cmd.pending_id):
        answer, change = await ports.unit.run(work)
    if isinstance(answer, Refused):
        raise answer
    if change == "decided":
        failpoint("approval.decide.after_db_commit")  # stored, messages queued, neither published nor answered
        record_latency(answer)
    return answer
