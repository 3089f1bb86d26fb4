"""A loop that waits for wake-ups stops when cancelled, however often it is woken (Python 3.11's
``asyncio.wait_for`` swallows a cancellation that meets a wake-up, which hung services at shutdown)."""

from __future__ import annotations

import asyncio

import pytest

from erpilot_platform.waiting import within, woken_within

pytestmark = pytest.mark.unit


async def _relay(event: asyncio.Event, wakes: list[bool], running: asyncio.Event) -> None:
    while True:
        event.clear()
        wakes.append(await woken_within(event, 0.5))
        running.set()


async def _keep_waking(event: asyncio.Event) -> None:
    while True:
        event.set()
        await asyncio.sleep(0)


async def test_a_loop_woken_all_the_time_still_stops_when_cancelled() -> None:
    for _ in range(50):  # with asyncio.wait_for, every one of these cancellations was swallowed
        event, wakes, running = asyncio.Event(), [], asyncio.Event()
        relay = asyncio.create_task(_relay(event, wakes, running))
        waker = asyncio.create_task(_keep_waking(event))
        await running.wait()  # woken at least once: the relay is in its loop
        relay.cancel()
        done, _ = await asyncio.wait({relay}, timeout=5)
        waker.cancel()
        assert relay in done and relay.cancelled()
        assert all(wakes)


async def test_woken_within_tells_a_wake_up_from_a_time_out() -> None:
    event = asyncio.Event()
    assert await woken_within(event, 0.01) is False
    event.set()
    assert await woken_within(event, 10) is True


async def test_within_returns_the_result_or_times_out() -> None:
    assert await within(asyncio.sleep(0, result=7), 10) == 7
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)
