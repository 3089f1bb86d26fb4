"""The session use cases on the in-memory unit of work: creating a session, the owner's views and list,
and the deadline warnings and votes shown on the session stream while a call waits for its approval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from erpilot_agent.service_layer import sessions
from erpilot_agent.service_layer.expiry_warnings import on_approval_expiring
from erpilot_agent.service_layer.session_ports import RunSummary
from erpilot_agent.service_layer.votes import before_resolution, on_approval_voted
from erpilot_contracts.agent.v1 import GetSessionV1, ListSessionsV1
from erpilot_contracts.approval.v1 import ApprovalExpiringV1, ApprovalResolvedV1, ApprovalVotedV1, VoteV1
from erpilot_platform.broker import TransientError

pytestmark = pytest.mark.unit
STOCK = {"sku": "SKU-PEN-BLUE", "delta": -3, "reason": "damaged in transit"}
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def uow(store):
    return store.unit_of_work


@pytest.fixture
async def waiting(service) -> dict:
    """A stock adjustment of ``ses_1`` waiting for approval ``pa_1``."""
    view = await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK,
                               call_id="c-1")
    assert (view["status"], view["pending_id"]) == ("awaiting_approval", "pa_1")
    return view


def warning(pending_id: str = "pa_1", call_id: str = "c-1") -> ApprovalExpiringV1:
    return ApprovalExpiringV1(pending_id=pending_id, call_id=call_id, session_id="ses_1", operation_id="op",
                              tool="adjust_stock", expires_at=NOW + timedelta(minutes=5), warned_at=NOW)


def vote(sub: str, action: str = "approve") -> VoteV1:
    return VoteV1(sub=sub, role="manager", action=action, at=NOW, comment=f"from {sub}")


def voted(sub: str, received: int, pending_id: str = "pa_1") -> ApprovalVotedV1:
    return ApprovalVotedV1(pending_id=pending_id, call_id="c-1", session_id="ses_1", operation_id="op",
                           vote=vote(sub), approvals_required=2, approvals_received=received, status="pending")


# --- sessions ---------------------------------------------------------------------------------------
async def test_a_session_is_created_once_and_its_id_is_its_owners(uow, store):
    assert (await sessions.create_session(uow, "ses_2", "bob", "stock count")).data == {"session_id": "ses_2"}
    again = await sessions.create_session(uow, "ses_2", "bob", "stock count")  # a redelivery
    taken = await sessions.create_session(uow, "ses_2", "mallory", None)

    assert again.ok and store.sessions["ses_2"].owner == "bob"
    assert (taken.ok, taken.error.code, taken.error.status) == (False, "idempotency_conflict", 409)


async def test_the_owner_sees_messages_calls_pending_approvals_and_runs(uow, store, waiting):
    store.runs["ses_1"] = [RunSummary("run_1", "waiting", None, NOW)]
    store.events.append(("ses_1", "message", {"role": "user", "text": "adjust the pens"}))

    view = (await sessions.session_view(uow, GetSessionV1(session_id="ses_1", owner="alice"))).data

    assert (view["run_status"], view["last_seq"]) == ("waiting", 3)  # tool_started, approval_pending, message
    assert view["runs"] == [{"run_id": "run_1", "status": "waiting", "error": None, "created_at": NOW.isoformat()}]
    assert view["messages"] == [{"seq": 3, "role": "user", "text": "adjust the pens"}]
    assert [c["call_id"] for c in view["tool_calls"]] == ["c-1"]
    assert [(p["call_id"], p["pending_id"]) for p in view["pending_approvals"]] == [("c-1", "pa_1")]


async def test_a_summary_has_no_calls_or_messages(uow, waiting):
    view = (await sessions.session_view(uow, GetSessionV1(session_id="ses_1", owner="alice",
                                                          summary_only=True))).data
    assert view["run_status"] == "idle" and "tool_calls" not in view and "messages" not in view


async def test_another_persons_session_and_call_are_not_found(uow, waiting):
    assert (await sessions.session_view(uow, GetSessionV1(session_id="ses_1", owner="bob"))).error.status == 404
    assert (await sessions.tool_call_view(uow, "ses_1", "bob", "c-1")).error.status == 404
    assert (await sessions.tool_call_view(uow, "ses_1", "alice", "c-9")).error.status == 404
    mine = await sessions.tool_call_view(uow, "ses_1", "alice", "c-1")
    assert (mine.data["call_id"], mine.data["status"]) == ("c-1", "awaiting_approval")


async def test_the_owners_sessions_page_newest_first(uow, store):
    for n in range(3):
        await sessions.create_session(uow, f"ses_p{n}", "carol", f"count {n}")
    for n, session in enumerate(sorted(s for s in store.sessions if s.startswith("ses_p"))):
        store.sessions[session].created_at = NOW + timedelta(minutes=n)  # a clock that moves

    first = (await sessions.list_sessions(uow, ListSessionsV1(owner="carol", limit=2))).data
    rest = (await sessions.list_sessions(uow, ListSessionsV1(owner="carol", limit=2,
                                                             cursor=first["next_cursor"]))).data
    found = (await sessions.list_sessions(uow, ListSessionsV1(owner="carol", q="COUNT 1"))).data

    assert [s["session_id"] for s in first["items"]] == ["ses_p2", "ses_p1"]
    assert [s["session_id"] for s in rest["items"]] == ["ses_p0"] and rest["next_cursor"] is None
    assert [s["session_id"] for s in found["items"]] == ["ses_p1"]
    bad = await sessions.list_sessions(uow, ListSessionsV1(owner="carol", cursor="not-a-cursor"))
    assert bad.error.status == 422


# --- deadline warnings ------------------------------------------------------------------------------
async def test_a_waiting_call_is_warned_once(uow, store, waiting):
    assert await on_approval_expiring(uow, warning()) is True
    assert await on_approval_expiring(uow, warning()) is False  # redelivered

    assert store.event_types("ses_1") == ["tool_started", "approval_pending", "approval_expiring"]
    [(_, _, data)] = [e for e in store.events if e[1] == "approval_expiring"]
    assert data == {"call_id": "c-1", "pending_id": "pa_1", "expires_at": (NOW + timedelta(minutes=5)).isoformat()}


async def test_a_warning_for_another_approval_or_call_shows_nothing(uow, store, waiting):
    assert await on_approval_expiring(uow, warning(pending_id="pa_old")) is False
    assert await on_approval_expiring(uow, warning(call_id="c-unknown")) is False
    assert "approval_expiring" not in store.event_types("ses_1")


async def test_a_warning_that_overtakes_the_approval_is_retried(uow, store, downstream, service):
    downstream.request_approval = _never_answers
    with pytest.raises(ConnectionError):
        await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK,
                            call_id="c-1")
    with pytest.raises(TransientError):
        await on_approval_expiring(uow, warning())


async def _never_answers(cmd):
    raise ConnectionError("approval service away")


# --- votes ------------------------------------------------------------------------------------------
async def test_each_vote_is_shown_once_while_the_call_waits(uow, store, waiting):
    assert await on_approval_voted(uow, voted("mia", 1)) is True
    assert await on_approval_voted(uow, voted("mia", 1)) is False  # redelivered
    assert await on_approval_voted(uow, voted("max", 2)) is True
    assert await on_approval_voted(uow, voted("zoe", 1, pending_id="pa_other")) is False

    shown = [(d["sub"], d["approvals_received"]) for _, t, d in store.events if t == "approval_vote"]
    assert shown == [("mia", 1), ("max", 2)]


async def test_a_resolution_shows_the_votes_that_did_not_arrive_yet(uow, store, waiting):
    await on_approval_voted(uow, voted("mia", 1))
    resolved = ApprovalResolvedV1(pending_id="pa_1", call_id="c-1", session_id="ses_1", operation_id="op",
                                  status="approved", decided_by="max",
                                  votes=[vote("mia"), vote("max")], approvals_required=2)

    assert await before_resolution(uow, resolved) == 1  # only max's; mia's is shown already
    assert await before_resolution(uow, resolved) == 0  # redelivered
    assert await on_approval_voted(uow, voted("max", 2)) is False  # the deciding vote's own event, late

    shown = [(d["sub"], d["approvals_received"]) for _, t, d in store.events if t == "approval_vote"]
    assert shown == [("mia", 1), ("max", 2)]
