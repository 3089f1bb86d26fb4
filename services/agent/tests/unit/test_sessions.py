"""The session use cases on the in-memory unit of work: creating a session, the owner's views and list,
and the deadline warnings and votes shown on the session stream while a call waits for its approval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from erpilot_agent.domain.run_state import Run
from erpilot_agent.domain.tool_calls import SessionEvent
from erpilot_agent.service_layer import sessions
from erpilot_agent.service_layer.escalations import on_approval_escalated
from erpilot_agent.service_layer.expiry_warnings import on_approval_expiring
from erpilot_agent.service_layer.votes import before_resolution, on_approval_voted
from erpilot_contracts.agent.v1 import CreateSessionV1, GetSessionV1, GetToolCallV1, ListSessionsV1
from erpilot_contracts.approval.v1 import (
    ApprovalEscalatedV1,
    ApprovalExpiringV1,
    ApprovalResolvedV1,
    ApprovalVotedV1,
    VoteV1,
)
from erpilot_contracts.sessions.v1 import GetSessionEventsV1
from erpilot_platform import cursors
from erpilot_platform.broker import TransientError
from erpilot_platform.refusals import Refused

from ..fakes import approval_record

pytestmark = pytest.mark.unit
STOCK = {"sku": "SKU-PEN-BLUE", "delta": -3, "reason": "damaged in transit"}
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
async def waiting(service, downstream) -> str:
    """A stock adjustment of ``ses_1`` waiting for approval ``pa_1``."""
    await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK, call_id="c-1")
    await service.on_approval_requested(approval_record(downstream.prepares[-1], "pa_1"))
    return "pa_1"


def warning(pending_id: str = "pa_1", call_id: str = "c-1") -> ApprovalExpiringV1:
    return ApprovalExpiringV1(pending_id=pending_id, call_id=call_id, session_id="ses_1", operation_id="op",
                              tool="adjust_stock", expires_at=NOW + timedelta(minutes=5), warned_at=NOW)


def vote(sub: str, action: str = "approve") -> VoteV1:
    return VoteV1(sub=sub, role="manager", action=action, at=NOW, comment=f"from {sub}")


def voted(sub: str, received: int, pending_id: str = "pa_1") -> ApprovalVotedV1:
    return ApprovalVotedV1(pending_id=pending_id, call_id="c-1", session_id="ses_1", operation_id="op",
                           vote=vote(sub), approvals_required=2, approvals_received=received, status="pending")


# --- sessions ---------------------------------------------------------------------------------------
async def refusal(coro) -> Refused:
    with pytest.raises(Refused) as refused:
        await coro
    return refused.value


async def test_a_session_is_created_once_and_its_id_is_its_owners(uow):
    create = CreateSessionV1(session_id="ses_2", owner="bob", title="stock count")
    assert (await sessions.create_session(uow, create)).session_id == "ses_2"
    again = await sessions.create_session(uow, create)  # a redelivery
    taken = await refusal(sessions.create_session(uow, CreateSessionV1(session_id="ses_2", owner="mallory")))

    assert again.session_id == "ses_2" and uow.state.sessions["ses_2"].owner == "bob"
    assert (taken.code, taken.status) == ("idempotency_conflict", 409)


async def test_the_owner_sees_messages_calls_pending_approvals_and_runs(uow, waiting):
    uow.state.runs["run_1"] = Run("run_1", "ses_1", "alice", "waiting", created_at=NOW, updated_at=NOW)
    await uow.run(lambda unit: unit.sessions.append("ses_1", [SessionEvent("message", {"role": "user",
                                                                                  "text": "adjust the pens"})]))

    view = await sessions.session_view(uow, GetSessionV1(session_id="ses_1", owner="alice"))

    assert (view.run_status, view.last_seq) == ("waiting", 3)  # tool_started, approval_pending, message
    assert [(r.run_id, r.status, r.error, r.created_at) for r in view.runs] == [("run_1", "waiting", None, NOW)]
    assert [(m.seq, m.role, m.text) for m in view.messages] == [(3, "user", "adjust the pens")]
    assert [c.call_id for c in view.tool_calls] == ["c-1"]
    assert [(p.call_id, p.pending_id) for p in view.pending_approvals] == [("c-1", "pa_1")]


async def test_a_result_too_large_for_the_session_view_is_a_marker_there_and_whole_in_the_calls_view(
        service, uow, downstream):
    downstream.run_answer = downstream.run_answer.model_copy(update={"result": {"blob": "x" * 40_000}})
    await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments={"sku": "S"},
                        call_id="c-big")

    [shown] = (await sessions.session_view(uow, GetSessionV1(session_id="ses_1", owner="alice"))).tool_calls
    whole = await sessions.tool_call_view(uow, GetToolCallV1(session_id="ses_1", owner="alice", call_id="c-big"))

    assert shown.result["omitted"] is True and whole.result == {"blob": "x" * 40_000}


async def test_a_summary_has_no_calls_or_messages(uow, waiting):
    view = await sessions.session_view(uow, GetSessionV1(session_id="ses_1", owner="alice", summary_only=True))
    assert view.run_status == "idle" and view.tool_calls is None and view.messages is None


async def test_another_persons_session_and_call_are_not_found(uow, waiting):
    def call(owner: str, call_id: str) -> GetToolCallV1:
        return GetToolCallV1(session_id="ses_1", owner=owner, call_id=call_id)

    assert (await refusal(sessions.session_view(uow, GetSessionV1(session_id="ses_1", owner="bob")))).status == 404
    assert (await refusal(sessions.tool_call_view(uow, call("bob", "c-1")))).status == 404
    assert (await refusal(sessions.tool_call_view(uow, call("alice", "c-9")))).status == 404
    mine = await sessions.tool_call_view(uow, call("alice", "c-1"))
    assert (mine.call_id, mine.status) == ("c-1", "awaiting_approval")


async def test_the_stored_events_are_replayed_to_the_owner_alone_after_a_seq_a_page_at_a_time(uow, waiting):
    def page(owner: str, after_seq: int, limit: int = 200) -> GetSessionEventsV1:
        return GetSessionEventsV1(session_id="ses_1", owner=owner, after_seq=after_seq, limit=limit)

    every = (await sessions.session_events(uow, page("alice", 0))).events
    assert [e.seq for e in every] == [1, 2]
    assert {e.session_id for e in every} == {"ses_1"} and every[-1].type == "approval_pending"
    later = await sessions.session_events(uow, page("alice", 1, limit=1))
    assert [(e.seq, e.type, e.data) for e in later.events] == [(2, every[1].type, every[1].data)]
    assert (await sessions.session_events(uow, page("alice", len(every)))).events == []
    assert (await refusal(sessions.session_events(uow, page("bob", 0)))).status == 404
    missing = GetSessionEventsV1(session_id="ses_9", owner="alice")
    assert (await refusal(sessions.session_events(uow, missing))).status == 404


async def test_a_page_of_events_ends_where_its_bytes_would_not_fit_one_reply_and_says_more_are_stored(
        uow, waiting, monkeypatch):
    whole = (await sessions.session_events(uow, GetSessionEventsV1(session_id="ses_1", owner="alice"))).events
    assert len(whole) == 2
    monkeypatch.setattr(sessions, "EVENT_PAGE_BYTES", 1)  # smaller than any event: one per page, never none

    first = await sessions.session_events(uow, GetSessionEventsV1(session_id="ses_1", owner="alice"))
    last = await sessions.session_events(uow, GetSessionEventsV1(session_id="ses_1", owner="alice", after_seq=1))
    assert ([e.seq for e in first.events], first.more) == ([1], True)
    assert ([e.seq for e in last.events], last.more) == ([2], False)


async def test_the_owners_sessions_page_newest_first(uow):
    for n in range(3):
        uow.advance(60)  # a clock that moves
        await sessions.create_session(uow, CreateSessionV1(session_id=f"ses_p{n}", owner="carol", title=f"count {n}"))

    first = await sessions.list_sessions(uow, ListSessionsV1(owner="carol", limit=2))
    rest = await sessions.list_sessions(uow, ListSessionsV1(owner="carol", limit=2, cursor=first.next_cursor))
    found = await sessions.list_sessions(uow, ListSessionsV1(owner="carol", q="COUNT 1"))

    assert [s.session_id for s in first.items] == ["ses_p2", "ses_p1"]
    assert [s.session_id for s in rest.items] == ["ses_p0"] and rest.next_cursor is None
    assert [s.session_id for s in found.items] == ["ses_p1"]
    bad = await refusal(sessions.list_sessions(uow, ListSessionsV1(owner="carol", cursor="not-a-cursor")))
    assert bad.status == 422
    beyond = cursors.encode(datetime.fromisoformat("0001-01-01T00:00:00+01:00"), "ses_x")  # no UTC for it
    bad_time = await refusal(sessions.list_sessions(uow, ListSessionsV1(owner="carol", cursor=beyond)))
    assert (bad_time.code, bad_time.status) == ("invalid_datetime", 422)


# --- deadline warnings ------------------------------------------------------------------------------
async def test_a_waiting_call_is_warned_once(uow, waiting):
    assert await on_approval_expiring(uow, warning()) is True
    assert await on_approval_expiring(uow, warning()) is False  # redelivered

    assert uow.event_types("ses_1") == ["tool_started", "approval_pending", "approval_expiring"]
    [data] = uow.events_of("ses_1", "approval_expiring")
    assert data == {"call_id": "c-1", "pending_id": "pa_1", "expires_at": (NOW + timedelta(minutes=5)).isoformat()}


async def test_a_warning_for_another_approval_or_call_shows_nothing(uow, waiting):
    assert await on_approval_expiring(uow, warning(pending_id="pa_old")) is False
    assert await on_approval_expiring(uow, warning(call_id="c-unknown")) is False
    assert "approval_expiring" not in uow.event_types("ses_1")


async def test_a_warning_that_overtakes_the_approval_is_retried(uow, service):
    await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK, call_id="c-1")
    with pytest.raises(TransientError):  # prepared; its evt.approval.requested not here yet
        await on_approval_expiring(uow, warning())


# --- escalations ------------------------------------------------------------------------------------
def escalation(pending_id: str = "pa_1", call_id: str = "c-1") -> ApprovalEscalatedV1:
    return ApprovalEscalatedV1(pending_id=pending_id, call_id=call_id, session_id="ses_1", operation_id="op",
                               tool="adjust_stock", escalated_to="admin", required_roles=["manager", "admin"],
                               escalated_at=NOW, expires_at=NOW + timedelta(minutes=5))


async def test_a_waiting_call_shows_its_escalation_once(uow, waiting):
    assert await on_approval_escalated(uow, escalation()) is True
    assert await on_approval_escalated(uow, escalation()) is False  # redelivered

    assert uow.event_types("ses_1") == ["tool_started", "approval_pending", "approval_escalated"]
    [data] = uow.events_of("ses_1", "approval_escalated")
    assert data == {"call_id": "c-1", "pending_id": "pa_1", "escalated_to": "admin",
                    "required_roles": ["manager", "admin"], "escalated_at": NOW.isoformat(),
                    "expires_at": (NOW + timedelta(minutes=5)).isoformat()}


async def test_an_escalation_after_the_decision_or_of_another_approval_shows_nothing(uow, service, waiting):
    assert await on_approval_escalated(uow, escalation(pending_id="pa_old")) is False
    assert await on_approval_escalated(uow, escalation(call_id="c-unknown")) is False
    await service.on_approval_resolved(ApprovalResolvedV1(pending_id="pa_1", call_id="c-1", session_id="ses_1",
                                                          operation_id="op", status="rejected", decided_by="max"))
    assert await on_approval_escalated(uow, escalation()) is False  # it arrived after the decision
    assert "approval_escalated" not in uow.event_types("ses_1")


async def test_an_escalation_that_overtakes_the_approval_is_retried(uow, service):
    await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK, call_id="c-1")
    with pytest.raises(TransientError):  # prepared; its evt.approval.requested not here yet
        await on_approval_escalated(uow, escalation())


# --- delegates ------------------------------------------------------------------------------------------
async def test_a_delegates_vote_and_decision_name_the_delegator(uow, service, waiting):
    for_bob = VoteV1(sub="ana", role="manager", action="approve", at=NOW, on_behalf_of="bob")
    resolved = ApprovalResolvedV1(pending_id="pa_1", call_id="c-1", session_id="ses_1", operation_id="op",
                                  status="approved", decided_by="ana", decided_on_behalf_of="bob",
                                  votes=[vote("mia"), for_bob], approvals_required=2)

    assert await before_resolution(uow, resolved) == 2
    await service.on_approval_resolved(resolved)

    shown = [(d["sub"], d.get("on_behalf_of"), d["approvals_received"])
             for d in uow.events_of("ses_1", "approval_vote")]
    assert shown == [("mia", None, 1), ("ana", "bob", 2)]
    [decision] = uow.events_of("ses_1", "approval_resolved")
    assert (decision["decided_by"], decision["decided_on_behalf_of"]) == ("ana", "bob")


# --- votes ------------------------------------------------------------------------------------------
async def test_each_vote_is_shown_once_while_the_call_waits(uow, waiting):
    assert await on_approval_voted(uow, voted("mia", 1)) is True
    assert await on_approval_voted(uow, voted("mia", 1)) is False  # redelivered
    assert await on_approval_voted(uow, voted("max", 2)) is True
    assert await on_approval_voted(uow, voted("zoe", 1, pending_id="pa_other")) is False

    shown = [(d["sub"], d["approvals_received"]) for d in uow.events_of("ses_1", "approval_vote")]
    assert shown == [("mia", 1), ("max", 2)]


async def test_a_resolution_shows_the_votes_that_did_not_arrive_yet(uow, waiting):
    await on_approval_voted(uow, voted("mia", 1))
    resolved = ApprovalResolvedV1(pending_id="pa_1", call_id="c-1", session_id="ses_1", operation_id="op",
                                  status="approved", decided_by="max",
                                  votes=[vote("mia"), vote("max")], approvals_required=2)

    assert await before_resolution(uow, resolved) == 1  # only max's; mia's is shown already
    assert await before_resolution(uow, resolved) == 0  # redelivered
    assert await on_approval_voted(uow, voted("max", 2)) is False  # the deciding vote's own event, late

    shown = [(d["sub"], d["approvals_received"]) for d in uow.events_of("ses_1", "approval_vote")]
    assert shown == [("mia", 1), ("max", 2)]
