"""``evt.agent.run_cancelled`` on real NATS and PostgreSQL: a cancel recorded by the agent withdraws the
run's approvals with no command from the gateway at all.

The agent is trusted least: the event names a session, an owner and call ids; the approval service
withdraws only what its own records say is pending for those calls of that session, requested by that
owner. Handling the event again changes nothing.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import nats
import pytest

from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.subjects import EVENTS_STREAM
from erpilot_platform.endpoints import ServiceBus

from .conftest import actor, later_marker, uid

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


def cancelled(session_id: str, *call_ids: str, owner: str = "alice") -> RunCancelledV1:
    return RunCancelledV1(session_id=session_id, run_id=uid("run_"), owner=owner, call_ids=list(call_ids),
                          cancelled_at=datetime.now(UTC))


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
    session_id = uid("ses-")
    own = await approvals.create("submit_order", session_id=session_id, requested_by="alice")
    another_call = await approvals.create("submit_order", session_id=session_id, requested_by="alice")
    someone_elses = await approvals.create("submit_order", session_id=session_id, requested_by="mallory")
    # The same call id in another session is another call.
    other_session = await approvals.create("submit_order", call_id=own["call_id"], requested_by="alice")
    decided = await approvals.create("submit_order", session_id=session_id, requested_by="alice")
    assert (await approvals.decide(decided, "approve", actor("bob", "approver"))).ok

    seq = await publish(nats_url, cancelled(session_id, own["call_id"], someone_elses["call_id"],
                                            decided["call_id"], "call-unknown"))
    await handled(nats_url, seq)

    status = {name: (await approvals.get(record["pending_id"], ADA)).data["status"] for name, record in {
        "own": own, "another_call": another_call, "someone_elses": someone_elses,
        "other_session": other_session, "decided": decided}.items()}
    assert status == {"own": "withdrawn", "another_call": "pending", "someone_elses": "pending",
                      "other_session": "pending", "decided": "approved"}


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
