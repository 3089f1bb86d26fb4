"""Escalation on PostgreSQL with real replicas (SPEC §10): an approval still undecided at ``escalate_after`` gains
``escalate_to`` once, however many replicas sweep and across a restart, never after a decision, and its deadline
stays. ``cancel_order`` here: approvers, ttl 20 s, escalating to managers after 1 s; ``adjust_stock`` keeps the
default (no escalation) and serves as the later marker."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

import pytest

from erpilot_approval.app import build
from erpilot_contracts import subjects

from .conftest import Approvals, Events, actor, at

pytestmark = pytest.mark.integration
POLICY = '[tools.cancel_order]\nttl = "20s"\nescalate_after = "1s"\nescalate_to = "manager"\n'
APPROVER, MANAGER = actor("bob", "approver"), actor("max", "manager")


@pytest.fixture
def escalating(settings_for, tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return lambda: settings_for(policy=path)


@asynccontextmanager
async def running(make_settings, replicas: int = 1):
    apps = [build(make_settings()) for _ in range(replicas)]
    for app in apps:
        await app.start()
    try:
        yield apps
    finally:
        for app in apps:
            await app.stop()


def escalations(events: Events, pending_id: str) -> list[tuple[float, dict]]:
    return [(arrived, body) for arrived, subject, body in events.items
            if subject == subjects.APPROVAL_EVT_ESCALATED and body["pending_id"] == pending_id]


async def escalation_marker(approvals: Approvals, events: Events) -> None:
    """An approval escalating after everything before it: once its event is in, any second (wrong) escalation of
    an earlier one would be too (the outbox publishes in order, the stream keeps it)."""
    marker = await approvals.create("cancel_order")
    await events.wait(lambda: escalations(events, marker["pending_id"]), timeout=30)


async def test_two_replicas_escalate_each_approval_once_on_time_and_keep_its_deadline(escalating, approvals,
                                                                                      events) -> None:
    async with running(escalating, replicas=2):
        records = await asyncio.gather(*(approvals.create("cancel_order") for _ in range(6)))
        for record in records:
            assert record["escalate_to"] == "manager" and record["escalated_at"] is None
            await events.wait(lambda r=record: escalations(events, r["pending_id"]), timeout=30)
        await escalation_marker(approvals, events)

        latencies = []
        for record in records:
            [(arrived, body)] = escalations(events, record["pending_id"])  # exactly one each
            latencies.append(arrived - at(record["escalate_at"]).timestamp())
            stored = (await approvals.get(record["pending_id"], MANAGER)).data
            assert (stored["required_roles"], stored["escalated_at"]) == (["approver", "manager"], body["escalated_at"])
            assert stored["expires_at"] == record["expires_at"] == body["expires_at"]  # never moved
            assert stored["can_decide"] is True
        print(f"\nescalation latency, 2 replicas: max {max(latencies) * 1000:.0f} ms, "
              f"min {min(latencies) * 1000:.0f} ms")
        assert max(latencies) < 1.0
        assert (await approvals.decide(records[0], "approve", MANAGER)).data["status"] == "approved"


async def test_an_escalation_due_while_every_replica_was_down_happens_once_after_the_restart(escalating, approvals,
                                                                                            events) -> None:
    async with running(escalating):
        record = await approvals.create("cancel_order")
    await asyncio.sleep(max(0.0, at(record["escalate_at"]).timestamp() - time.time()) + 0.5)  # due, nobody up
    assert escalations(events, record["pending_id"]) == []

    async with running(escalating):  # every process of the service restarted
        await events.wait(lambda: escalations(events, record["pending_id"]), timeout=30)
    async with running(escalating):  # and again: nothing more
        await escalation_marker(approvals, events)
        assert len(escalations(events, record["pending_id"])) == 1
        stored = (await approvals.get(record["pending_id"], MANAGER)).data
        assert (stored["status"], stored["expires_at"]) == ("pending", record["expires_at"])


async def test_a_decision_before_the_time_stands_and_nothing_escalates_after_it(escalating, approvals,
                                                                                events) -> None:
    async with running(escalating, replicas=2):
        decided = await approvals.create("cancel_order")
        assert (await approvals.decide(decided, "reject", APPROVER)).data["status"] == "rejected"
        await escalation_marker(approvals, events)  # created later, escalated: the decided one's time had come

        assert escalations(events, decided["pending_id"]) == []
        stored = (await approvals.get(decided["pending_id"], APPROVER)).data
        assert (stored["status"], stored["required_roles"], stored["escalated_at"]) == ("rejected", ["approver"], None)
