"""``cmd.approval.decide_many``: one action on several approvals, all or none, in one transaction.

Every row is locked first, in ``pending_id`` order (two bulk decisions, or a bulk and a single one, never
deadlock), then each item is decided in the order given with exactly the checks of a single decision.
The first refusal rolls the whole transaction back and is answered with that item's own code and status,
naming it (``details.pending_id``, ``details.index``): nothing was decided, no vote, no grant, no message.
Each approving item sends its own ``cmd.erp.commit`` from the same transaction. A repeated command
(redelivery, a retry) finds the recorded votes and answers them again.
"""

from __future__ import annotations

from erpilot_approval.domain import approvals as domain
from erpilot_approval.domain.approvals import ApprovalError
from erpilot_approval.service_layer.common import delegations_to
from erpilot_approval.service_layer.decisions import record_latency, store_vote
from erpilot_approval.service_layer.mapping import record_for
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_contracts.approval.v1 import ApprovalRecordV1, DecideManyV1, DecisionsV1
from erpilot_platform.refusals import Refused


def item_refused(index: int, pending_id: str, code: str, status: int, message: str) -> Refused:
    """An item failed: the transaction rolls back and this is the answer."""
    return Refused(code, f"item {index} ({pending_id}): {message}; nothing was decided", status,
                   pending_id=pending_id, index=index)


async def decide_many(cmd: DecideManyV1, ports: Ports) -> DecisionsV1:
    """One action on several approvals: all decided in one transaction, or none.

    All items decided with one action, or none (the first failing item named with its own code)."""
    ids = [item.pending_id for item in cmd.items]
    if len(set(ids)) != len(ids):
        duplicate = next(pid for index, pid in enumerate(ids) if pid in ids[:index])
        raise Refused("duplicate_item", f"{duplicate} appears twice", 422, pending_id=duplicate,
                      index=ids.index(duplicate, ids.index(duplicate) + 1))
    actor = cmd.actor

    async def work(unit: Work) -> tuple[list[ApprovalRecordV1], list[ApprovalRecordV1]]:
        locked = {pid: await unit.approvals.get(pid, lock=True) for pid in sorted(ids)}
        now = await unit.now()
        lent = await delegations_to(unit, ports, actor.sub, now, lock=True)
        records, decided = [], []
        for index, item in enumerate(cmd.items):
            approval = locked[item.pending_id]
            if approval is None:
                raise item_refused(index, item.pending_id, "not_found", 404, "approval not found")
            try:
                outcome = domain.decide(approval, cmd.action, item.fingerprint, actor.sub, actor.roles,
                                        cmd.comment, now, lent)
            except ApprovalError as error:
                raise item_refused(index, item.pending_id, error.code, error.http_status, error.message) from None
            change = await store_vote(unit, ports, outcome, action=cmd.action, fingerprint=item.fingerprint,
                                      comment=cmd.comment, now=now)
            record = record_for(outcome.approval, actor.sub, actor.roles, now, lent)
            records.append(record)
            if change == "decided":
                decided.append(record)
        return records, decided

    records, decided = await ports.unit.run(work)
    for record in decided:
        record_latency(record)
    return DecisionsV1(action=cmd.action, items=records)
