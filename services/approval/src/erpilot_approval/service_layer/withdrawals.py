"""Withdrawal: the owner cancelled a waiting run; its pending approvals end ``withdrawn``.

One way in: ``evt.agent.run_cancelled``, from the agent's outbox, written in the cancel's own transaction, with
the cancel command's requester assertion, forwarded unchanged. The agent is trusted least: the assertion must
verify for that session, name the event's owner and be bound to that run when the event was stored (else
``InvalidMessage``: dead-lettered, nothing withdrawn); from the event only the session, the call ids and the owner
are taken, and the approvals touched are looked up here, among this service's own records: those the owner
requested.

The same transaction ends the run for standing approvals (``standing.record_run_end``): no call of it is approved
at once any more (the gateway says so too, ``cmd.approval.end_run``, before it asks the agent to cancel).

One transaction, each approval's row locked (in ``pending_id`` order, so two withdrawals never deadlock)
before its status is read: a decision racing the withdrawal either comes first (the approval stays
``approved`` and commits) or finds ``withdrawn`` (409 ``already_decided``). A second withdrawal of the same
approval changes nothing. Nothing is ever signed here, so a withdrawn operation has no grant and no commit.
"""

from __future__ import annotations

from datetime import datetime

from erpilot_approval.domain.withdrawal import may_withdraw, withdraw
from erpilot_approval.service_layer.common import emit_resolved, expire_if_due
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_approval.service_layer.standing import record_run_end
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_platform import deliveries
from erpilot_platform.assertions import require_vouched


def verify_owner(event: RunCancelledV1, ports: Ports, *, stored_at: datetime) -> None:
    """The gateway vouched for the event's owner in this session, for cancelling this run, and the vouching still
    held when the event was stored: ``stored_at`` (JetStream's time, ``deliveries.stored_at``), never the event's
    own ``cancelled_at``, which the agent writes (with it an old assertion would withdraw at any later time)."""
    require_vouched(event.assertion, ports.assertion_key, session_id=event.session_id, sub=event.owner,
                           run_id=event.run_id, at=stored_at)


async def withdraw_cancelled_run(event: RunCancelledV1, ports: Ports, *, stored_at: datetime | None = None) -> None:
    """The agent recorded a cancel (with the owner's assertion): withdraw the owner's pending approvals of its calls.

    ``stored_at``: when JetStream stored the event (default: the delivery being handled, ``deliveries.stored_at``)."""
    stored_at = stored_at or deliveries.stored_at()
    verify_owner(event, ports, stored_at=stored_at)
    # The assertion vouches for the cancel of this run only: the agent's list of call ids is held to the run's own
    # calls (``<run_id>:*``), so it cannot withdraw the owner's approvals of other runs or direct calls with it.
    calls = {call_id for call_id in event.call_ids if call_id.startswith(f"{event.run_id}:")}

    async def work(unit: Work) -> None:
        # Every row first (the audit chain's lock is taken after the rows, never before one of them).
        pending_ids = await unit.approvals.pending_of_calls(event.session_id, sorted(calls))
        locked = [await unit.approvals.get(pid, lock=True) for pid in pending_ids]
        now = await unit.now()  # after the locks: a wait for one counts against a deadline
        await record_run_end(unit, event.session_id, event.run_id, by=event.owner, now=now)
        for approval in locked:
            if (approval is None or approval.call_id not in calls
                    or not may_withdraw(approval, session_id=event.session_id, actor_sub=event.owner)):
                continue
            withdrawn = withdraw(approval, event.owner, now)
            if withdrawn is None:
                await expire_if_due(unit, approval, now)  # past its deadline: it expired, and says so
                continue
            await unit.approvals.save_outcome(withdrawn)
            await unit.approvals.append_decision(approval.pending_id, actor=event.owner, action="withdraw",
                                                 fingerprint=approval.fingerprint, comment=None, at=now)
            await emit_resolved(unit, withdrawn)

    await ports.unit.run(work)
