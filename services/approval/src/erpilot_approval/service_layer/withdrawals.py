"""Withdrawal: the owner cancelled a waiting run; its pending approvals end ``withdrawn``.

Two ways in, one effect. ``cmd.approval.withdraw`` comes from the gateway (the authenticated owner,
answered at once); ``evt.agent.run_cancelled`` comes from the agent's outbox, written in the cancel's
own transaction, so the withdrawal follows from the cancel even when the gateway never sends its
command. The agent is trusted least: from its event only the session, the call ids and the owner are
taken, and the approvals touched are looked up here, among this service's own records.

One transaction, each approval's row locked (in ``pending_id`` order, so two withdrawals never
deadlock) before its status is read: a decision racing the withdrawal either comes first (the
approval stays ``approved`` and commits) or finds ``withdrawn`` (409 ``already_decided``). A second
withdrawal of the same approval changes nothing. Nothing is ever signed here, so a withdrawn
operation has no grant and the ERP cannot commit it.
"""

from __future__ import annotations

from erpilot_approval.domain.withdrawal import may_withdraw, withdraw
from erpilot_approval.service_layer.common import emit_resolved, expire_if_due
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, Ports
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.approval.v1 import WithdrawApprovalsV1
from erpilot_contracts.base import ReplyV1


async def withdraw_approvals(cmd: WithdrawApprovalsV1, ports: Ports) -> ReplyV1:
    """Withdraw what is still pending; answer each approval's status afterwards (``not_found`` when it is
    unknown, of another session, or not the actor's)."""

    async def work(uow: ApprovalUnitOfWork) -> tuple[list[dict], bool]:
        return await _withdraw(uow, sorted(set(cmd.pending_ids)), session_id=cmd.session_id,
                               actor_sub=cmd.actor.sub)

    items, changed = await ports.store.run(work)
    if changed:
        ports.store.wake()
    return ReplyV1.success({"items": items})


async def withdraw_cancelled_run(event: RunCancelledV1, ports: Ports) -> None:
    """The agent recorded a cancel: withdraw the owner's pending approvals of those calls of that session."""
    calls = set(event.call_ids)

    async def work(uow: ApprovalUnitOfWork) -> tuple[list[dict], bool]:
        pending_ids = await uow.approvals.pending_of_calls(event.session_id, sorted(calls))
        return await _withdraw(uow, pending_ids, session_id=event.session_id, actor_sub=event.owner, calls=calls)

    _, changed = await ports.store.run(work)
    if changed:
        ports.store.wake()


async def _withdraw(uow: ApprovalUnitOfWork, pending_ids: list[str], *, session_id: str, actor_sub: str,
                    calls: set[str] | None = None) -> tuple[list[dict], bool]:
    """Withdraw each approval (locked, in the given order) that ``actor_sub`` requested in ``session_id``
    (and, when ``calls`` is given, that belongs to one of them); each one's status afterwards."""
    items, changed = [], False
    now = await uow.now()
    # Every row first (the audit chain's lock is taken after the rows, never before one of them).
    locked = {pid: await uow.approvals.get(pid, lock=True) for pid in pending_ids}
    for pending_id, approval in locked.items():
        if (approval is None or not may_withdraw(approval, session_id=session_id, actor_sub=actor_sub)
                or (calls is not None and approval.call_id not in calls)):
            items.append({"pending_id": pending_id, "status": "not_found"})
            continue
        withdrawn = withdraw(approval, actor_sub, now)
        if withdrawn is not None:
            await uow.approvals.save_outcome(withdrawn)
            await uow.approvals.append_decision(pending_id, actor=actor_sub, action="withdraw",
                                                fingerprint=approval.fingerprint, comment=None, at=now)
            await emit_resolved(uow, withdrawn)
            approval, changed = withdrawn, True
        elif await expire_if_due(uow, approval, now):
            approval, changed = await uow.approvals.get(pending_id), True
        items.append({"pending_id": pending_id, "status": approval.status})
    return items, changed
