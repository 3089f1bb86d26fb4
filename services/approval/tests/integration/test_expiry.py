"""Deadlines: stored once, kept across restarts, enforced within a second by any number of replicas.

``cancel_order`` has a 2 s ttl in these tests. Latency is measured from ``expires_at`` (database clock)
to the arrival of ``evt.approval.resolved`` on JetStream (same host, same clock).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

import asyncpg
import pytest

from erpilot_approval.app import build
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_platform.grants import verify_grant
from erpilot_platform.notifications import asyncpg_dsn

from .conftest import VERIFY_KEY, actor, at, later_marker

pytestmark = pytest.mark.integration
APPROVER = actor("bob", "approver")


@asynccontextmanager
async def running(settings_for, replicas: int = 1, *, sweeper: bool = True):
    apps = [build(settings_for()) for _ in range(replicas)]
    for app in apps:
        if not sweeper:
            app.background = [job for job in app.background if job.__name__ != "expiry"]
        await app.start()
    try:
        yield apps
    finally:
        for app in apps:
            await app.stop()


async def sleep_until(wall_time: float) -> None:
    await asyncio.sleep(max(wall_time - time.time(), 0.0))


def latency(events, record: dict) -> float:
    (arrived, body), = events.of(record["pending_id"])
    assert body["status"] == "expired" and at(body["decided_at"]) == at(record["expires_at"])
    return arrived - at(record["expires_at"]).timestamp()


async def test_two_replicas_expire_each_approval_once_within_a_second(settings_for, approvals, events) -> None:
    async with running(settings_for, replicas=2):
        records = await asyncio.gather(*(approvals.create("cancel_order") for _ in range(6)))
        for record in records:
            await events.wait(lambda r=record: events.of(r["pending_id"]), timeout=30)
        await later_marker(approvals, events, expiring=True)  # a second (wrong) expiry would be in by now
        latencies = [latency(events, record) for record in records]  # exactly one event each
        print(f"\nexpiry latency, 2 replicas: max {max(latencies) * 1000:.0f} ms, "
              f"min {min(latencies) * 1000:.0f} ms")
        assert max(latencies) < 1.0
        late = await approvals.decide(records[0], "approve", APPROVER)
        assert (late.error.code, late.error.status) == ("expired", 409)
        assert (await approvals.get(records[0]["pending_id"], APPROVER)).data["status"] == "expired"


async def listeners_connected(database_url: str, count: int) -> None:
    """Wait until ``count`` deadline listeners are connected (each listens right after it connects)."""
    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        for _ in range(200):
            if await connection.fetchval("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                                         "erpilot-approval-deadlines") >= count:
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the deadline listeners did not connect")
    finally:
        await connection.close()


async def test_a_deadline_stored_by_a_replica_that_never_sweeps_expires_on_time(settings_for, approvals,
                                                                               events) -> None:
    # The sweeping replica sleeps up to a minute while it listens: only the storing commit's notification
    # makes it look in time at the approvals the other replica stored (about half of them).
    async with running(settings_for, sweeper=False), running(settings_for):
        await listeners_connected(settings_for().database_url, 2)
        records = await asyncio.gather(*(approvals.create("cancel_order") for _ in range(6)))
        for record in records:
            await events.wait(lambda r=record: events.of(r["pending_id"]), timeout=30)
        latencies = [latency(events, record) for record in records]
        print("\nexpiry latency, one sweeping replica of two (ms):", sorted(round(x * 1000) for x in latencies))
        assert max(latencies) < 1.0


async def test_a_restart_keeps_expires_at_to_the_microsecond_and_expiry_on_time(settings_for, approvals,
                                                                               events) -> None:
    async with running(settings_for):
        short = await approvals.create("cancel_order")
        long = await approvals.create("submit_order")
    async with running(settings_for):  # every process of the service restarted
        for record in (short, long):
            reloaded = (await approvals.get(record["pending_id"], APPROVER)).data
            assert reloaded["expires_at"] == record["expires_at"]
            assert at(reloaded["expires_at"]) == at(record["expires_at"])
        assert any(at(r["expires_at"]).microsecond for r in (short, long))  # not truncated to the second
        await events.wait(lambda: events.of(short["pending_id"]), timeout=30)
        elapsed = latency(events, short)
        print(f"\nexpiry latency after a restart: {elapsed * 1000:.0f} ms")
        assert elapsed < 1.0
        assert (await approvals.get(long["pending_id"], APPROVER)).data["status"] == "pending"


async def test_a_decision_racing_the_deadline_is_approved_or_expired_never_both(settings_for, approvals,
                                                                              events) -> None:
    # Around the deadline, and far enough on each side that both outcomes happen even on a loaded host.
    offsets = [-1.5, -0.8, -0.05, -0.02, -0.01, -0.005, 0.0, 0.0, 0.005, 0.01, 0.02, 0.05, 0.3]
    async with running(settings_for, replicas=2):
        records = await asyncio.gather(*(approvals.create("cancel_order") for _ in offsets))

        async def race(record: dict, offset: float):
            await sleep_until(at(record["expires_at"]).timestamp() + offset)
            return await approvals.decide(record, "approve", APPROVER)

        replies = await asyncio.gather(*(race(r, o) for r, o in zip(records, offsets, strict=True)))
        for record in records:
            await events.wait(lambda r=record: events.of(r["pending_id"]), timeout=30)
        await later_marker(approvals, events, expiring=True)
    outcomes = []
    for record, reply in zip(records, replies, strict=True):
        (_, body), = events.of(record["pending_id"])  # exactly one resolution
        if reply.ok:
            assert (reply.data["status"], body["status"]) == ("approved", "approved")
            assert at(reply.data["decided_at"]) < at(record["expires_at"])
            assert verify_grant(GrantV1.model_validate(body["grant"]), VERIFY_KEY)
        else:
            assert (reply.error.code, body["status"], body["grant"]) == ("expired", "expired", None)
        outcomes.append(body["status"])
    print(f"\ndeadline race: {outcomes.count('approved')} approved, {outcomes.count('expired')} expired")
    # A race took place: decisions landed on both sides of the deadline (the early ones approved, the
    # late ones expired), so each outcome above was really decided against the clock.
    assert {"approved", "expired"} <= set(outcomes), outcomes


async def test_a_late_decision_is_refused_even_before_any_sweep(settings_for, approvals, events) -> None:
    async with running(settings_for, sweeper=False):
        record = await approvals.create("cancel_order")
        await sleep_until(at(record["expires_at"]).timestamp() + 0.05)
        assert not events.of(record["pending_id"])  # nobody swept
        late = await approvals.decide(record, "approve", APPROVER)
        assert (late.error.code, late.error.status) == ("expired", 409)
        await events.wait(lambda: events.of(record["pending_id"]))  # the refusal expired it on the spot
        again = await approvals.decide(record, "approve", APPROVER)
        assert again.error.code == "expired"
        await later_marker(approvals, events)
        assert len(events.of(record["pending_id"])) == 1
