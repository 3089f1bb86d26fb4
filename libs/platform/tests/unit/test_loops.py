"""``every``: the one loop of every background job. A fake clock records each wait instead of sleeping."""

from __future__ import annotations

import asyncio
import logging

import pytest
from sqlalchemy import MetaData

from erpilot_platform.loops import Soon, every, looking_later, retry_wait
from erpilot_platform.outbox import Outbox, outbox_table

pytestmark = pytest.mark.unit


class Stop(BaseException):
    """Ends a loop under test (``every`` only survives an ``Exception``)."""


class FakeClock:
    """Records how long the loop asked to wait and returns at once, as if the time had passed."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, event: asyncio.Event, seconds: float) -> bool:
        self.waits.append(seconds)
        return False


def scripted(*answers: object):
    """A job answering ``answers`` in turn (an exception instance is raised), then stopping the loop."""
    remaining = list(answers)
    calls: list[int] = []

    async def job() -> object:
        calls.append(1)
        if not remaining:
            raise Stop
        answer = remaining.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    job.calls = calls  # type: ignore[attr-defined]
    return job


async def test_a_job_runs_again_after_each_interval() -> None:
    clock = FakeClock()
    with pytest.raises(Stop):
        await every(2.5, scripted(None, 3, None), wait=clock)
    assert clock.waits == [2.5, 2.5, 2.5]  # a count (3) is not a wait


async def test_a_job_may_ask_for_its_next_pass_sooner() -> None:
    clock = FakeClock()
    job = scripted(Soon(0.25), Soon(0), None)
    with pytest.raises(Stop):
        await every(5.0, job, wait=clock)
    assert clock.waits == [0.25, 5.0]  # Soon(0): again at once, no wait
    assert len(job.calls) == 4


async def test_a_failing_job_is_logged_and_retried_with_a_bounded_back_off(caplog) -> None:
    clock = FakeClock()
    boom = RuntimeError("database away")
    job = scripted(boom, boom, boom, boom, boom, None, boom)
    with caplog.at_level(logging.WARNING, logger="erpilot_platform.loops"), pytest.raises(Stop):
        await every(1.0, job, name="reconciler", wait=clock)
    assert clock.waits == [1.0, 2.0, 4.0, 5.0, 5.0, 1.0, 1.0]  # a success resets the back-off
    assert "reconciler failed (5 in a row)" in caplog.text
    assert "database away" in caplog.text


async def test_the_back_off_can_be_pinned() -> None:
    clock = FakeClock()
    boom = RuntimeError("broker away")
    with pytest.raises(Stop):
        await every(5.0, scripted(boom, boom, boom), retry_after=0.2, max_retry_after=0.2, wait=clock)
    assert clock.waits == [0.2, 0.2, 0.2]


def test_retry_wait_doubles_up_to_its_bound() -> None:
    assert [retry_wait(n, 0.5, 3.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


async def test_a_wake_up_runs_the_job_before_its_interval() -> None:
    wake, passes = asyncio.Event(), asyncio.Queue()

    async def job() -> None:
        passes.put_nowait(1)

    loop = asyncio.create_task(every(3600, job, wake=wake))
    await passes.get()  # the first pass runs at once
    wake.set()
    await passes.get()  # an hour early: it was woken
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop


async def test_a_wake_up_during_a_pass_is_not_lost() -> None:
    wake, passes = asyncio.Event(), asyncio.Queue()

    async def job() -> None:
        if passes.empty() and not hasattr(job, "woke"):
            job.woke = True  # type: ignore[attr-defined]
            wake.set()  # a writer committed while this pass was looking
        passes.put_nowait(1)

    loop = asyncio.create_task(every(3600, job, wake=wake))
    await passes.get()
    await passes.get()  # the second pass came without waiting the hour
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop


async def test_a_cancellation_stops_the_loop_while_the_job_runs() -> None:
    started, never = asyncio.Event(), asyncio.Event()

    async def job() -> None:
        started.set()
        await never.wait()

    loop = asyncio.create_task(every(1.0, job))
    await started.wait()
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop


def waking(wake: asyncio.Event, ran: asyncio.Event):
    """A job that wakes its own loop on every pass (as a busy writer would)."""

    async def job() -> None:
        ran.set()
        wake.set()

    return job


async def test_a_loop_woken_all_the_time_still_stops_when_cancelled() -> None:
    for _ in range(50):  # the cancellation meets a wake-up: asyncio.wait_for would swallow it
        wake, ran = asyncio.Event(), asyncio.Event()
        loop = asyncio.create_task(every(0.5, waking(wake, ran), wake=wake))
        await ran.wait()
        loop.cancel()
        done, _ = await asyncio.wait({loop}, timeout=5)
        assert loop in done and loop.cancelled()


async def test_looking_later_waits_its_delay_after_a_wake_up_never_past_the_interval() -> None:
    wake = asyncio.Event()
    assert not await looking_later(3600.0)(wake, 0.0)  # not woken: the interval ran out
    wake.set()
    assert await looking_later(0.0)(wake, 3600.0)  # woken: it looks `delay` later (here at once)
    assert await looking_later(3600.0)(wake, 0.0)  # never later than the interval it was given


def test_every_wake_up_of_an_outbox_sets_its_watchers() -> None:
    outbox = Outbox(outbox_table(MetaData()), lock_key=1)
    first, second = outbox.watch(), outbox.watch()
    outbox.wake()
    assert first.is_set() and second.is_set()
