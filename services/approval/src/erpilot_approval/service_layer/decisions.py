"""``cmd.approval.decide``: exactly one decision wins, decided under the row lock by the database clock."""

from __future__ import annotations

from datetime import datetime

from erpilot_approval.domain import approvals as domain
from erpilot_approval.domain.approvals import ApprovalError, DecisionOutcome
from erpilot_approval.service_layer import audit
from erpilot_approval.service_layer.common import emit_resolved, emit_voted, expire_if_due, not_found, refused
from erpilot_approval.service_layer.mapping import grant_for, record_for
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Ports
from erpilot_contracts.approval.v1 import ApprovalRecordV1, DecideV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform.failpoints import failpoint
from erpilot_platform.grants import sign_grant
from erpilot_platform.telemetry import decision_latency, step


async def store_vote(uow: ApprovalUnitOfWork, ports: Ports, outcome: DecisionOutcome, *, action: str,
                     fingerprint: str, comment: str | None, now: datetime) -> str | None:
    """Persist a new vote and, when it decides, the decision with its grant and events (row lock held).

    Returns ``"decided"``, ``"voted"`` (a quorum approval still waiting) or None (a repeat: nothing new).
    """
    decided = outcome.approval
    if not outcome.is_new:
        return None
    await uow.approvals.append_vote(decided.pending_id, outcome.vote)
    await audit.voted(uow.audit, decided, outcome.vote)
    await emit_voted(uow, decided, outcome.vote)
    if not outcome.ended:
        return "voted"
    grant = sign_grant(grant_for(decided), ports.signing_key) if decided.status == "approved" else None
    await uow.approvals.save_outcome(decided, grant)
    await uow.approvals.append_decision(decided.pending_id, actor=outcome.vote.sub, action=action,
                                        fingerprint=fingerprint, comment=comment, at=now)
    await emit_resolved(uow, decided, grant)
    return "decided"


def record_latency(record: ApprovalRecordV1) -> None:
    decision_latency.record((record.decided_at - record.created_at).total_seconds(),
                            {"tool": record.tool, "status": record.status})


async def decide(cmd: DecideV1, ports: Ports) -> ReplyV1:
    """One transaction: lock the row, read the clock, vote, and when the vote decides: sign, log, queue.

    Whoever takes the lock second sees the first decision (already_decided, or the recorded result
    when it is the same person repeating the same action). Under a quorum the votes are serialised by
    the same lock, so the grant is signed once, by the vote that reaches the quorum. A decision at or
    after ``expires_at`` is refused and expires the approval on the spot, even if no sweeper has run yet.
    """

    async def work(uow: ApprovalUnitOfWork) -> tuple[ReplyV1, str | None]:
        approval = await uow.approvals.get(cmd.pending_id, lock=True)
        if approval is None:
            return not_found(cmd.pending_id), None
        now = await uow.now()  # read after the lock: a wait for it counts against the deadline
        try:
            outcome = domain.decide(approval, cmd.action, cmd.fingerprint, cmd.actor.sub, cmd.actor.roles,
                                    cmd.comment, now)
        except ApprovalError as error:
            expired = error.code == "expired" and await expire_if_due(uow, approval, now)
            return refused(error), "expired" if expired else None
        change = await store_vote(uow, ports, outcome, action=cmd.action, fingerprint=cmd.fingerprint,
                                  comment=cmd.comment, now=now)
        if change == "decided":
            failpoint("approval.decide.before_db_commit")  # grant signed, decision and event written, not committed
        return ReplyV1.success(record_for(outcome.approval, cmd.actor.sub, cmd.actor.roles, now)), change

    origin = await ports.store.read_one(lambda uow: uow.approvals.trace_context(cmd.pending_id))
    # In the tool call's trace (stored with the request), linked to this decision's own request.
    with step("approval", "decide", resume=origin, pending_id=cmd.pending_id):
        reply, change = await ports.store.run(work)
    if change == "decided":
        failpoint("approval.decide.after_db_commit")  # stored, event queued, neither published nor answered
        record_latency(ApprovalRecordV1.model_validate(reply.data))
    if change is not None:
        ports.store.wake()
    return reply
