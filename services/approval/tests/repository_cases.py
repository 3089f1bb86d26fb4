"""The approval service's repositories, one set of cases for every implementation of its ``Work``.

Each case takes ``units`` (a ``Units``: a unit of work of the implementation under test, the key its audit chain
is signed with, empty at the start). ``unit/test_repositories.py`` runs them on the memory fakes,
``integration/test_repositories.py`` on the memory fakes and on PostgreSQL, so a fake that drifts from the SQL
it stands for fails here, not in a test that trusts it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_approval.domain.approvals import PENDING_OR_DECIDED, ApprovalRequest, PendingApproval, new_pending
from erpilot_approval.domain.audit import verify
from erpilot_approval.domain.delegation import Delegation, RoleScope
from erpilot_approval.domain.edits import EditIntent
from erpilot_approval.domain.policy import load_policy
from erpilot_approval.domain.standing_runs import StandingRun
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer.ports import ListFilter, Work
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import ApprovalResolvedV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_platform.uow import UnitOfWorkPort

POLICY = load_policy(None)


@dataclass
class Units:
    uow: UnitOfWorkPort[Work]
    key: Ed25519PrivateKey
    emitted: Callable[[], Awaitable[list[tuple[str, str]]]]  # (subject, msg_id) committed to the outbox

    async def now(self) -> datetime:
        return await self.uow.read(lambda unit: unit.now())

    async def insert(self, *approvals: PendingApproval) -> None:
        async def work(unit: Work) -> None:
            for approval in approvals:
                assert await unit.approvals.insert_new(approval, trace_context={"traceparent": approval.pending_id})

        await self.uow.run(work)

    async def get(self, pending_id: str) -> PendingApproval | None:
        return await self.uow.read(lambda unit: unit.approvals.get(pending_id))


def pending(at: datetime, tool: str = "submit_order", *, amount_minor: int = 12_345, **changes: Any
            ) -> PendingApproval:
    """A new pending approval created at ``at`` (fresh ids; ``changes`` to the request or the approval)."""
    arguments = {"submit_order": {"draft_id": "D-1", "revision": 2}, "cancel_order": {"order_id": "O-1"},
                 "adjust_stock": {"sku": "SKU-1", "delta": -3, "reason": "count"}}[tool]
    ids = uuid.uuid4().hex[:12]
    request = ApprovalRequest(
        call_id=changes.pop("call_id", f"call-{ids}"), session_id=changes.pop("session_id", f"ses-{ids}"), tool=tool,
        tool_schema_version=1, arguments=arguments, fingerprint=fingerprint(tool, 1, arguments),
        operation_id=f"op-{ids}", preview={"operation": tool, "object": "x", "target": "y",
                                           "amount_minor": amount_minor, "lines": [{"sku": "SKU-1", "qty": 2}]},
        requested_by=changes.pop("requested_by", "alice"))
    return replace(new_pending(request, POLICY, at, f"pa_{ids}"), **changes)


def vote(sub: str, at: datetime, action: str = "approve", role: str = "manager", on_behalf_of: str | None = None
         ) -> Vote:
    return Vote(sub=sub, role=role, action=action, fingerprint="sha256:" + "a" * 64, at=at, comment=f"{sub} says",
                on_behalf_of=on_behalf_of)


async def test_an_approval_reads_back_as_it_was_stored_and_its_operation_is_unique(units: Units) -> None:
    now = await units.now()
    approval = replace(pending(now), editors=("ann", "carl"), edited_by="carl", supersedes="pa_before")
    await units.insert(approval)

    assert await units.get(approval.pending_id) == approval

    async def by_operation(unit: Work) -> tuple[Any, ...]:
        return (await unit.approvals.get_by_operation(approval.operation_id),
                await unit.approvals.trace_context(approval.pending_id),
                await unit.approvals.status(approval.pending_id),
                await unit.approvals.get("pa_unknown"), await unit.approvals.status("pa_unknown"))

    assert await units.uow.read(by_operation) == (approval, {"traceparent": approval.pending_id}, "pending",
                                                  None, None)
    twin = replace(pending(now), operation_id=approval.operation_id)  # another id, the same operation
    assert await units.uow.run(lambda unit: unit.approvals.insert_new(twin)) is False
    assert await units.get(twin.pending_id) is None


async def test_votes_come_back_in_order_and_the_outcome_is_saved_without_touching_the_deadline(units: Units) -> None:
    now = await units.now()
    approval = pending(now, "adjust_stock")
    await units.insert(approval)
    first, second = vote("mia", now), vote("max", now + timedelta(seconds=1))
    decided = replace(approval, status="approved", decided_by="max", decided_at=now + timedelta(seconds=1),
                      comment="ok", expires_at=now)  # expires_at is never written

    async def work(unit: Work) -> None:
        await unit.approvals.append_vote(approval.pending_id, first)
        await unit.approvals.append_vote(approval.pending_id, second)
        await unit.approvals.save_outcome(decided)
        await unit.approvals.append_decision(approval.pending_id, actor="max", action="approve",
                                             fingerprint=approval.fingerprint, comment="ok", at=now)

    await units.uow.run(work)
    stored = await units.get(approval.pending_id)
    assert stored.votes == (first, second)
    assert (stored.status, stored.decided_by, stored.decided_at, stored.comment, stored.expires_at) == (
        "approved", "max", now + timedelta(seconds=1), "ok", approval.expires_at)
    without = await units.uow.read(lambda unit: unit.approvals.get_by_operation(approval.operation_id, votes=False))
    assert without.votes == () and without.status == "approved"


async def test_a_unit_of_work_that_raises_leaves_nothing_and_emits_nothing(units: Units) -> None:
    approval = pending(await units.now())

    async def work(unit: Work) -> None:
        await unit.approvals.insert_new(approval)
        await unit.emit(subjects.APPROVAL_EVT_RESOLVED, ApprovalResolvedV1(
            pending_id=approval.pending_id, call_id=approval.call_id, session_id=approval.session_id,
            operation_id=approval.operation_id, status="rejected"))
        raise RuntimeError("the work failed")

    with pytest.raises(RuntimeError):
        await units.uow.run(work)
    assert await units.get(approval.pending_id) is None
    assert await units.emitted() == []


async def test_what_a_unit_of_work_emits_is_committed_with_it_under_its_message_id(units: Units) -> None:
    approval = pending(await units.now())
    resolved = ApprovalResolvedV1(pending_id=approval.pending_id, call_id=approval.call_id,
                                  session_id=approval.session_id, operation_id=approval.operation_id,
                                  status="rejected")

    async def work(unit: Work) -> None:
        await unit.approvals.insert_new(approval)
        await unit.emit(subjects.APPROVAL_EVT_RESOLVED, resolved)
        await unit.emit(subjects.ERP_CMD_COMMIT, resolved, msg_id=f"erp.commit.{approval.operation_id}")

    await units.uow.run(work)
    [(first, fresh), second] = await units.emitted()
    assert first == subjects.APPROVAL_EVT_RESOLVED and fresh  # a fresh id of its own
    assert second == (subjects.ERP_CMD_COMMIT, f"erp.commit.{approval.operation_id}")


async def test_pending_approvals_of_calls_are_those_of_that_session_in_id_order(units: Units) -> None:
    now = await units.now()
    a, b = pending(now, session_id="ses-x", call_id="c1"), pending(now, session_id="ses-x", call_id="c2")
    other_session = pending(now, session_id="ses-y", call_id="c1")
    decided = pending(now, session_id="ses-x", call_id="c3", status="rejected")
    await units.insert(a, b, other_session, decided)

    found = await units.uow.read(lambda unit: unit.approvals.pending_of_calls("ses-x", ["c1", "c2", "c3", "c9"]))
    assert found == sorted([a.pending_id, b.pending_id])
    assert await units.uow.read(lambda unit: unit.approvals.pending_of_calls("ses-x", [])) == []


async def test_a_call_has_one_first_approval_and_its_edits_beside_it(units: Units) -> None:
    """uq_approvals_call (migration 0016): a second first version of one call is never stored (security review of
    #32); an edit's version (supersedes) is."""
    now = await units.now()
    session_id = f"ses-one-{uuid.uuid4().hex[:8]}"
    first = pending(now, session_id=session_id, call_id="c1")
    await units.insert(first)
    assert (await units.uow.read(lambda unit: unit.approvals.first_of_call(session_id, "c1"))).pending_id == (
        first.pending_id)

    with pytest.raises(Exception) as refused:  # noqa: PT011 - ValueError in memory, the unique index in SQL (asyncpg)
        await units.insert(pending(now, session_id=session_id, call_id="c1"))
    assert "uq_approvals_call" in str(refused.value)
    await units.insert(pending(now, session_id=session_id, call_id="c1", supersedes=first.pending_id))
    assert await units.uow.read(lambda unit: unit.approvals.first_of_call(session_id, "c9")) is None


async def test_due_approvals_come_earliest_first_and_the_next_deadline_is_relative_to_now(units: Units) -> None:
    now = await units.now()
    late, later = pending(now - timedelta(minutes=20)), pending(now - timedelta(minutes=19))
    done = pending(now - timedelta(minutes=30), status="expired")
    waiting = pending(now - timedelta(minutes=14, seconds=20))  # due in 40 s
    await units.insert(later, done, waiting, late)

    async def due(unit: Work) -> tuple[list[str], list[str], int]:
        return ([a.pending_id for a in await unit.approvals.lock_due(now, 10)],
                [a.pending_id for a in await unit.approvals.lock_due(now, 1)], await unit.approvals.count_pending())

    assert await units.uow.run(due) == ([late.pending_id, later.pending_id], [late.pending_id], 3)
    seconds = await units.uow.read(lambda unit: unit.approvals.seconds_to_next_deadline())
    assert -5 * 60 - 5 < seconds <= -5 * 60  # the earliest pending deadline, overdue by five minutes


async def test_the_decidable_list_filters_by_role_status_and_where_newest_first(units: Units) -> None:
    now = await units.now()
    old = pending(now - timedelta(seconds=3), session_id="ses-l", requested_by="bob")
    mid = pending(now - timedelta(seconds=2), "cancel_order", session_id="ses-l")
    new = pending(now - timedelta(seconds=1), session_id="ses-m")
    big = pending(now, amount_minor=5_000_000, session_id="ses-l")  # managers only
    gone = pending(now, session_id="ses-l", status="rejected")
    await units.insert(old, mid, new, big, gone)

    async def listed(roles: list[str], status: str = "pending", **where: Any) -> list[str]:
        found = await units.uow.read(lambda unit: unit.approvals.list_decidable(
            roles, status=status, where=ListFilter(**where), limit=10))
        return [a.pending_id for a in found]

    assert await listed(["approver"]) == [new.pending_id, mid.pending_id, old.pending_id]
    assert await listed(["approver", "manager"]) == [big.pending_id, new.pending_id, mid.pending_id, old.pending_id]
    assert await listed(["requester"]) == []
    assert await listed(["approver"], session_id="ses-l", tool="submit_order") == [old.pending_id]
    assert await listed(["approver"], requested_by="bob") == [old.pending_id]
    assert await listed(["approver"], since=now - timedelta(seconds=2)) == [new.pending_id, mid.pending_id]
    assert await listed(["approver"], before=(mid.created_at, mid.pending_id)) == [old.pending_id]
    assert await listed(["approver"], status="rejected") == [gone.pending_id]
    top = await units.uow.read(lambda unit: unit.approvals.list_decidable(
        ["approver", "manager"], status="pending", where=ListFilter(), limit=2))
    assert [a.pending_id for a in top] == [big.pending_id, new.pending_id]


async def test_approvals_naming_a_draft_or_an_order_are_found_by_role_and_status_newest_first(units: Units) -> None:
    now = await units.now()
    draft_id, order_id = f"D-{uuid.uuid4().hex[:8]}", f"O-{uuid.uuid4().hex[:8]}"
    submit = pending(now - timedelta(seconds=4), arguments={"draft_id": draft_id, "revision": 1})
    cancel = pending(now - timedelta(seconds=3), "cancel_order", arguments={"order_id": order_id})
    refunded = pending(now - timedelta(seconds=2), "cancel_order", arguments={"order_id": order_id},
                       required_roles=["manager"], status="approved")
    expired = pending(now - timedelta(seconds=1), arguments={"draft_id": draft_id, "revision": 2}, status="expired")
    elsewhere = pending(now, arguments={"draft_id": f"{draft_id}0", "revision": 1})  # another draft, same prefix
    await units.insert(submit, cancel, refunded, expired, elsewhere)

    async def naming(roles: list[str], *, drafts: tuple[str, ...] = (), orders: tuple[str, ...] = (),
                     statuses: tuple[str, ...] = PENDING_OR_DECIDED, limit: int = 10) -> list[str]:
        found = await units.uow.read(lambda unit: unit.approvals.naming(
            draft_ids=list(drafts), order_ids=list(orders), roles=roles, statuses=statuses, limit=limit))
        return [a.pending_id for a in found]

    assert await naming(["approver"], drafts=(draft_id,)) == [submit.pending_id]
    assert await naming(["approver"], orders=(order_id,)) == [cancel.pending_id]
    assert await naming(["manager"], orders=(order_id,)) == [refunded.pending_id]
    assert await naming(["approver", "manager"], drafts=(draft_id,), orders=(order_id,)) == [
        refunded.pending_id, cancel.pending_id, submit.pending_id]
    assert await naming(["approver", "manager"], drafts=(draft_id,), orders=(order_id,), limit=1) == [
        refunded.pending_id]
    assert await naming(["approver"], drafts=(draft_id,), statuses=("expired",)) == [expired.pending_id]
    assert await naming(["requester", "admin"], drafts=(draft_id,), orders=(order_id,)) == []
    assert await naming(["approver"], orders=(draft_id,)) == []  # a draft id is no order id
    assert await naming(["approver"]) == []


async def test_an_expiry_warning_is_due_within_its_window_and_recorded_once(units: Units) -> None:
    now = await units.now()
    soon = pending(now - timedelta(minutes=12))  # 3 minutes left
    far = pending(now)  # 15 minutes left
    await units.insert(soon, far)

    async def warn(unit: Work) -> tuple[list[str], bool, bool]:
        due = await unit.approvals.lock_due_warnings("submit_order", timedelta(minutes=5), now, 10)
        return ([a.pending_id for a in due], await unit.approvals.record_warning(soon.pending_id, now),
                await unit.approvals.record_warning(soon.pending_id, now))

    assert await units.uow.run(warn) == ([soon.pending_id], True, False)
    again = await units.uow.run(lambda unit: unit.approvals.lock_due_warnings("submit_order", timedelta(minutes=5),
                                                                              now, 10))
    assert again == []


async def test_an_edit_intent_is_recorded_once_and_kept_once_it_has_an_outcome(units: Units) -> None:
    now = await units.now()
    intent = EditIntent(operation_id=f"op_{uuid.uuid4().hex}", pending_id="pa_old", editor="bob",
                        fingerprint="sha256:" + "b" * 64, arguments={"draft_id": "D-2", "revision": 3},
                        created_at=now)
    other = replace(intent, editor="eve")

    assert await units.uow.run(lambda unit: unit.edits.add(intent)) is True
    assert await units.uow.run(lambda unit: unit.edits.add(other)) is False  # the first one stands
    assert await units.uow.read(lambda unit: unit.edits.get(intent.operation_id)) == intent
    assert await units.uow.read(lambda unit: unit.edits.get("op_unknown")) is None

    refusal = {"code": "already_decided", "status": 409, "message": "already approved by carol"}
    await units.uow.run(lambda unit: unit.edits.refuse(intent.operation_id, refusal))
    await units.uow.run(lambda unit: unit.edits.forget(intent.operation_id))  # an outcome is kept
    assert await units.uow.read(lambda unit: unit.edits.get(intent.operation_id)) == replace(intent, refusal=refusal)

    waiting = replace(intent, operation_id=f"op_{uuid.uuid4().hex}")
    await units.uow.run(lambda unit: unit.edits.add(waiting))
    await units.uow.run(lambda unit: unit.edits.forget(waiting.operation_id))
    assert await units.uow.read(lambda unit: unit.edits.get(waiting.operation_id)) is None


async def test_the_audit_chain_verifies_appends_once_and_signs_its_head_once(units: Units) -> None:
    approval = pending(await units.now())

    async def append(unit: Work) -> list[bool]:
        return [await unit.audit.append("request", pending_id=approval.pending_id,
                                        operation_id=approval.operation_id, actor="alice", data={"n": 1}),
                await unit.audit.append("commit_outcome", pending_id=approval.pending_id,
                                        operation_id=approval.operation_id, actor=None, data={}, once=True),
                await unit.audit.append("commit_outcome", pending_id=approval.pending_id,
                                        operation_id=approval.operation_id, actor=None, data={}, once=True),
                await unit.audit.append("request", pending_id="pa_other", operation_id="op_other", actor="bob",
                                        data={"nested": {"a": [1, 2]}})]

    assert await units.uow.run(append) == [True, True, False, True]
    mark = await units.uow.run(lambda unit: unit.audit.checkpoint())
    assert mark is not None and mark.seq == 3
    assert await units.uow.run(lambda unit: unit.audit.checkpoint()) is None  # the head is signed already

    async def rows(**where: Any) -> list:
        return await units.uow.read(lambda unit: unit.audit.rows_of(**{
            "pending_id": None, "operation_id": None, "since": None, "limit": 100, **where}))

    every = await rows(since=datetime(2000, 1, 1, tzinfo=mark.signed_at.tzinfo))
    assert [row.kind for row in every] == ["request", "commit_outcome", "request"]
    assert verify(every, units.key.public_key(), [mark]) == (None, 3)
    assert [row.seq for row in await rows(pending_id=approval.pending_id)] == [1, 2]
    assert [row.seq for row in await rows(operation_id="op_other")] == [3]
    assert [row.seq for row in await rows(since=every[0].at, limit=1)] == [1]


async def test_webhook_deliveries_are_added_once_leased_retried_and_finished(units: Units) -> None:
    async def add(unit: Work) -> int:
        return await unit.webhooks.add(event_id="msg_1", event_type="approval.requested", pending_id="pa_1",
                                       body='{"a":1}', urls=["https://a.example/h", "https://b.example/h"])

    assert await units.uow.run(add) == 2
    assert await units.uow.run(add) == 0  # a redelivered event adds nothing
    now = await units.now()
    claimed = await units.uow.run(lambda unit: unit.webhooks.claim_due(now + timedelta(seconds=1), 10,
                                                                       timedelta(seconds=60)))
    assert sorted(row.url for row in claimed) == ["https://a.example/h", "https://b.example/h"]
    assert {(row.event_type, row.body, row.attempts) for row in claimed} == {("approval.requested", '{"a":1}', 0)}
    leased = await units.uow.run(lambda unit: unit.webhooks.claim_due(now + timedelta(seconds=2), 10,
                                                                      timedelta(seconds=60)))
    assert leased == []  # another replica skips them while the lease holds

    first, second = sorted(claimed, key=lambda row: row.url)

    async def settle(unit: Work) -> None:
        await unit.webhooks.finish(first.delivery_id, status="delivered", attempts=1, at=now)
        await unit.webhooks.retry_later(second.delivery_id, attempts=1, at=now + timedelta(seconds=30),
                                        error="HTTP 503")

    await units.uow.run(settle)
    seconds = await units.uow.read(lambda unit: unit.webhooks.seconds_to_next())
    assert 25 < seconds <= 30
    [again] = await units.uow.run(lambda unit: unit.webhooks.claim_due(now + timedelta(seconds=31), 10,
                                                                       timedelta(seconds=60)))
    assert (again.delivery_id, again.attempts, again.last_error) == (second.delivery_id, 1, "HTTP 503")


async def test_a_delegates_vote_and_decision_keep_whom_they_were_for_and_an_authority_votes_once(units: Units
                                                                                               ) -> None:
    now = await units.now()
    approval = pending(now, "adjust_stock")
    await units.insert(approval)
    for_bob = vote("ana", now, on_behalf_of="bob")
    decided = replace(approval, status="approved", decided_by="ana", decided_on_behalf_of="bob", decided_at=now)

    async def work(unit: Work) -> None:
        await unit.approvals.append_vote(approval.pending_id, for_bob)
        await unit.approvals.save_outcome(decided)
        await unit.approvals.append_decision(approval.pending_id, actor="ana", action="approve",
                                             fingerprint=approval.fingerprint, comment=None, at=now,
                                             on_behalf_of="bob")

    await units.uow.run(work)
    stored = await units.get(approval.pending_id)
    assert stored.votes == (for_bob,) and stored.votes[0].principal == "bob"
    assert (stored.decided_by, stored.decided_on_behalf_of) == ("ana", "bob")
    with pytest.raises(Exception):  # noqa: B017 (memory: ValueError; SQL: the unique index votes_one_per_principal)
        await units.uow.run(lambda unit: unit.approvals.append_vote(approval.pending_id, vote("bob", now)))
    assert (await units.get(approval.pending_id)).votes == (for_bob,)


async def test_due_escalations_come_earliest_first_once_and_never_after_a_decision_or_the_deadline(units: Units
                                                                                                 ) -> None:
    now = await units.now()

    def escalating(at: datetime, after: timedelta, **changes: Any) -> PendingApproval:
        made = pending(at, "cancel_order")
        return replace(made, escalate_to="manager", escalate_at=made.created_at + after, **changes)

    first = escalating(now - timedelta(minutes=3), timedelta(minutes=1))
    second = escalating(now - timedelta(minutes=2), timedelta(minutes=1))
    later = escalating(now, timedelta(seconds=40))  # due in 40 s
    done = escalating(now - timedelta(minutes=3), timedelta(minutes=1), status="rejected")
    once = escalating(now - timedelta(minutes=3), timedelta(minutes=1), escalated_at=now - timedelta(minutes=2))
    late = escalating(now - timedelta(minutes=20), timedelta(minutes=1))  # past its deadline: expires instead
    never = pending(now - timedelta(minutes=3), "cancel_order")
    await units.insert(second, later, done, once, late, never, first)

    due = await units.uow.run(lambda unit: unit.approvals.lock_due_escalations(now, 10))
    assert [a.pending_id for a in due] == [first.pending_id, second.pending_id]
    seconds = await units.uow.read(lambda unit: unit.approvals.seconds_to_next_escalation())
    assert -2 * 60 - 5 < seconds <= -2 * 60  # the first, overdue by two minutes

    raised = replace(first, required_roles=["approver", "manager"], escalated_at=now,
                     expires_at=now, status="rejected")  # only the roles and the time are written
    await units.uow.run(lambda unit: unit.approvals.save_escalation(raised))
    stored = await units.get(first.pending_id)
    assert (stored.required_roles, stored.escalated_at, stored.expires_at, stored.status) == (
        ["approver", "manager"], now, first.expires_at, "pending")
    again = await units.uow.run(lambda unit: unit.approvals.lock_due_escalations(now, 10))
    assert [a.pending_id for a in again] == [second.pending_id]


async def test_a_delegation_is_stored_once_in_force_until_revoked_or_its_until(units: Units) -> None:
    now = await units.now()

    def given(delegation_id: str, delegator: str, delegate: str, until: timedelta, **changes: Any) -> Delegation:
        return Delegation(delegation_id=f"{delegation_id}-{uuid.uuid4().hex[:6]}", delegator=delegator,
                          delegate=delegate, roles=("manager",), tools=changes.pop("tools", None),
                          until=now + until, created_at=now - timedelta(seconds=len(delegation_id)), **changes)

    bob_ana = given("d1", "bob", "ana", timedelta(days=1), tools=("submit_order", "refund_payment"))
    carl_ana = given("d22", "carl", "ana", timedelta(hours=1))
    ana_dora = given("d333", "ana", "dora", timedelta(hours=1))
    ended = given("d4444", "eve", "ana", timedelta(seconds=-1))
    revoked = given("d55555", "fay", "ana", timedelta(days=1), revoked_at=now - timedelta(seconds=1))

    async def add(unit: Work) -> list[bool]:
        await unit.delegations.serialise_gives()
        return [await unit.delegations.add(d) for d in (bob_ana, carl_ana, ana_dora, ended, revoked, bob_ana)]

    assert await units.uow.run(add) == [True, True, True, True, True, False]
    assert await units.uow.read(lambda unit: unit.delegations.get(bob_ana.delegation_id)) == bob_ana
    assert await units.uow.read(lambda unit: unit.delegations.get("dlg_unknown")) is None

    async def in_force(people: list[str], **options: Any) -> list[str]:
        found = await units.uow.run(lambda unit: unit.delegations.in_force(people, now, **options))
        return [d.delegation_id for d in found]

    # Oldest first (a longer id is an older delegation here).
    assert await in_force(["ana"]) == [ana_dora.delegation_id, carl_ana.delegation_id, bob_ana.delegation_id]
    assert await in_force(["ana"], delegate_only=True, lock=True) == [carl_ana.delegation_id, bob_ana.delegation_id]
    assert await in_force(["bob", "zoe"]) == [bob_ana.delegation_id]

    await units.uow.run(lambda unit: unit.delegations.save_revocation(replace(bob_ana, revoked_at=now)))
    assert await in_force(["bob"]) == []
    assert (await units.uow.read(lambda unit: unit.delegations.get(bob_ana.delegation_id))).revoked_at == now


async def test_a_delegated_scope_lists_the_approvals_of_its_tools_its_roles_may_decide(units: Units) -> None:
    now = await units.now()
    order = pending(now - timedelta(seconds=2), amount_minor=5_000_000)  # managers only
    stock = pending(now - timedelta(seconds=1), "adjust_stock")  # managers only
    cancel = pending(now, "cancel_order")  # approvers only
    await units.insert(order, stock, cancel)

    async def listed(roles: list[str], *scopes: RoleScope) -> list[str]:
        found = await units.uow.read(lambda unit: unit.approvals.list_decidable(
            roles, status="pending", where=ListFilter(), limit=10, delegated=scopes))
        return [a.pending_id for a in found]

    assert await listed([], RoleScope(("manager",), ("submit_order",))) == [order.pending_id]
    assert await listed([], RoleScope(("manager",), ("submit_order", "adjust_stock", "cancel_order"))) == [
        stock.pending_id, order.pending_id]
    both = await listed(["approver"], RoleScope(("manager",), ("adjust_stock",)),
                        RoleScope(("approver", "manager"), ("cancel_order",)))
    assert both == [cancel.pending_id, stock.pending_id]  # each once


async def test_a_runs_standing_row_is_made_once_and_keeps_its_count_and_end(units: Units) -> None:
    now = await units.now()
    session_id, run_id = f"ses-{uuid.uuid4().hex[:8]}", f"run_{uuid.uuid4().hex[:8]}"

    first = await units.uow.run(lambda unit: unit.standing.run(session_id, run_id))
    assert first == StandingRun(session_id, run_id)
    await units.uow.run(lambda unit: unit.standing.save_run(replace(first, approved=2, ended_at=now, ended_by="al")))
    again = await units.uow.run(lambda unit: unit.standing.run(session_id, run_id))
    assert (again.approved, again.ended_at, again.ended_by) == (2, now, "al")
    assert await units.uow.run(lambda unit: unit.standing.run(session_id, "run_other")) == StandingRun(
        session_id, "run_other")
