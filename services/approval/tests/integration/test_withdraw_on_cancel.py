"""``evt.agent.run_cancelled`` on real NATS and PostgreSQL, the one way a withdrawal comes: a cancel recorded by
the agent withdraws the run's approvals, with the cancel command's requester assertion.

The agent is trusted least: the event names a session, an owner and call ids, and carries the gateway's
assertion for the owner; without one that verifies for that session and person, nothing is withdrawn and the
event is dead-lettered. The approval service withdraws only what its own records say is pending for those
calls of that session, requested by that owner. Handling the event again changes nothing; a withdrawal racing
decisions has exactly one outcome (both under the approval's row lock).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import nats
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.subjects import EVENTS_STREAM
from erpilot_platform.endpoints import ServiceBus

from .conftest import actor, cancelled, later_marker, uid

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("approval_service")]
ADA = actor("ada", "admin")
DURABLE = ServiceBus(None, "approval")._durable_name(subjects.AGENT_EVT_RUN_CANCELLED)  # type: ignore[arg-type]


async def publish(nats_url: str, event: RunCancelledV1) -> int:
    """Publish the event as the agent's outbox relay would (a fresh ``Nats-Msg-Id``); its stream seq."""
    nc = await nats.connect(nats_url)
    try:
        ack = await nc.jetstream().publish(subjects.AGENT_EVT_RUN_CANCELLED, event.model_dump_json().encode(),
                                           stream=EVENTS_STREAM.name, headers={"Nats-Msg-Id": uuid.uuid4().hex})
        return ack.seq
    finally:
        await nc.close()


async def handled(nats_url: str, seq: int, timeout: float = 20.0) -> None:
    """Wait until the approval service acknowledged every run_cancelled event up to stream ``seq``."""
    nc = await nats.connect(nats_url)
    try:
        deadline = time.monotonic() + timeout
        while (info := await nc.jetstream().consumer_info(EVENTS_STREAM.name, DURABLE)).ack_floor.stream_seq < seq:
            assert time.monotonic() < deadline, f"event {seq} not acknowledged: {info.ack_floor}"
            await nc.flush()
    finally:
        await nc.close()


async def test_the_agents_cancel_record_withdraws_the_runs_approvals_without_the_gateway(
        approvals, events, nats_url) -> None:
    session_id = uid("ses-")
    own = await approvals.create("submit_order", session_id=session_id, requested_by="alice")

    await publish(nats_url, cancelled(session_id, own["call_id"]))

    [(_, body)] = await events.wait(lambda: events.of(own["pending_id"]))
    assert (body["status"], body["decided_by"], body["grant"]) == ("withdrawn", "alice", None)
    late = await approvals.decide(own, "approve", actor("bob", "approver"))
    assert (late.error.code, late.error.status) == ("already_decided", 409)


async def test_only_pending_approvals_of_the_named_calls_that_the_owner_requested_are_withdrawn(
        approvals, events, nats_url) -> None:
    session_id, run = uid("ses-"), uid("run_")

    async def create(n: str, **kw):
        return await approvals.create("submit_order", **{"session_id": session_id, "call_id": f"{run}:{n}", **kw})

    own = await create("1", requested_by="alice")
    another_call = await create("2", requested_by="alice")
    someone_elses = await create("3", requested_by="mallory")
    # The same call id in another session is another call.
    other_session = await create("1", session_id=uid("ses-"), requested_by="alice")
    decided = await create("4", requested_by="alice")
    # The owner's call of another run, which the agent adds to the cancel's call ids: not the cancelled run's.
    other_run = await approvals.create("submit_order", session_id=session_id, requested_by="alice")
    assert (await approvals.decide(decided, "approve", actor("bob", "approver"))).ok

    seq = await publish(nats_url, cancelled(session_id, own["call_id"], someone_elses["call_id"],
                                            decided["call_id"], f"{run}:unknown", other_run["call_id"], run_id=run))
    await handled(nats_url, seq)

    status = {name: (await approvals.get(record["pending_id"], ADA)).data["status"] for name, record in {
        "own": own, "another_call": another_call, "someone_elses": someone_elses,
        "other_session": other_session, "decided": decided, "other_run": other_run}.items()}
    assert status == {"own": "withdrawn", "another_call": "pending", "someone_elses": "pending",
                      "other_session": "pending", "decided": "approved", "other_run": "pending"}


async def test_the_event_handled_again_changes_nothing(approvals, events, nats_url) -> None:
    session_id = uid("ses-")
    own = await approvals.create("submit_order", session_id=session_id, requested_by="alice")
    event = cancelled(session_id, own["call_id"])

    await publish(nats_url, event)
    await events.wait(lambda: events.of(own["pending_id"]))
    await handled(nats_url, await publish(nats_url, event))  # redelivered past the duplicate window
    await later_marker(approvals, events)  # whatever the second handling emitted has arrived by now

    record = (await approvals.get(own["pending_id"], ADA)).data
    assert (record["status"], record["decided_by"]) == ("withdrawn", "alice")
    assert len(events.of(own["pending_id"])) == 1


@pytest.mark.parametrize("round_", range(4))
async def test_a_withdrawal_racing_approvals_has_exactly_one_outcome(approvals, events, nats_url, round_) -> None:
    session_id = uid("ses-")
    record = await approvals.create("submit_order", session_id=session_id, requested_by="alice")
    deciders = [approvals.decide(record, "approve", actor(f"approver-{i}", "approver")) for i in range(3)]
    *decisions, _ = await asyncio.gather(*deciders, publish(nats_url, cancelled(session_id, record["call_id"])))

    [(_, body)] = await events.wait(lambda: events.of(record["pending_id"]))
    await later_marker(approvals, events)
    assert len(events.of(record["pending_id"])) == 1  # one outcome, one event
    approved = [reply for reply in decisions if reply.ok]
    if body["status"] == "withdrawn":
        assert not approved and body["grant"] is None and events.commits_of(record["operation_id"]) == []
        assert {reply.error.code for reply in decisions} == {"already_decided"}
    else:  # a decision came first: it stands, with its grant and its commit; the withdrawal changed nothing
        assert body["status"] == "approved" and len(approved) == 1 and body["grant"] is not None
        assert len(events.commits_of(record["operation_id"])) == 1


@pytest.mark.parametrize(("make", "reason"), [
    (lambda session, call: cancelled(session, call).model_copy(update={"assertion": None}), "assertion_missing"),
    (lambda session, call: cancelled(session, call, key=Ed25519PrivateKey.generate()), "assertion_invalid"),
    # The agent names the requester as the owner of a session the gateway vouched someone else for.
    (lambda session, call: cancelled(session, call, vouched_for="mallory"), "assertion_subject_mismatch"),
    (lambda session, call: cancelled(session, call, signed_at=datetime.now(UTC) - timedelta(hours=2)),
     "assertion_expired"),
])
async def test_a_cancel_the_gateway_did_not_vouch_for_withdraws_nothing(approvals, events, nats_url, make,
                                                                        reason) -> None:
    session_id = uid("ses-")
    own = await approvals.create("submit_order", session_id=session_id, requested_by="alice")

    await handled(nats_url, await publish(nats_url, make(session_id, own["call_id"])))
    await later_marker(approvals, events)
    assert (await approvals.get(own["pending_id"], ADA)).data["status"] == "pending"
    assert not events.of(own["pending_id"])
