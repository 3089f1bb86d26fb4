"""``cmd.approval.withdraw``: the owner cancelled a waiting run; its pending approvals end ``withdrawn``.

One transaction, each approval's row locked (in ``pending_id`` order, so two withdrawals never
deadlock) before its status is read: a decision racing the withdrawal either comes first (the
approval stays ``approved`` and commits) or finds ``withdrawn`` (409 ``already_decided``). Nothing is
ever signed here, so a withdrawn operation has no grant and the ERP cannot commit it.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_approval.adapters import repository
from erpilot_approval.domain.withdrawal import may_withdraw, withdraw
from erpilot_approval.service_layer.common import Deps, emit_resolved, expire_if_due
from erpilot_contracts.approval.v1 import WithdrawApprovalsV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform.db import run_in_transaction


async def withdraw_approvals(deps: Deps, cmd: WithdrawApprovalsV1) -> ReplyV1:
    """Withdraw what is still pending; answer each approval's status afterwards (``not_found`` when it is
    unknown, of another session, or not the actor's)."""

    async def work(conn: AsyncConnection) -> tuple[list[dict], bool]:
        items, changed = [], False
        now = await repository.db_now(conn)
        # Every row first (the audit chain's lock is taken after the rows, never before one of them).
        locked = {pid: await repository.get(conn, pid, lock=True) for pid in sorted(set(cmd.pending_ids))}
        for pending_id, approval in locked.items():
            if approval is None or not may_withdraw(approval, session_id=cmd.session_id, actor_sub=cmd.actor.sub):
                items.append({"pending_id": pending_id, "status": "not_found"})
                continue
            withdrawn = withdraw(approval, cmd.actor.sub, now)
            if withdrawn is not None:
                await repository.save_outcome(conn, withdrawn)
                await repository.append_decision(conn, pending_id, actor=cmd.actor.sub, action="withdraw",
                                                 fingerprint=approval.fingerprint, comment=None, at=now)
                await emit_resolved(conn, deps.outbox, withdrawn, audit=deps.audit)
                approval, changed = withdrawn, True
            elif await expire_if_due(conn, deps.outbox, approval, now, audit=deps.audit):
                approval, changed = await repository.get(conn, pending_id), True
            items.append({"pending_id": pending_id, "status": approval.status})
        return items, changed

    items, changed = await run_in_transaction(deps.engine, work)
    if changed:
        deps.outbox.wake()
    return ReplyV1.success({"items": items})
