"""Background loops: one shape for every service's forever-running job (issue 12).

``every(interval, job, wake=...)`` runs ``job`` forever: every ``interval`` seconds, sooner when
``wake`` is set (so a writer can say "look now" instead of the loop polling), and as soon as the job
asks for it by returning ``Soon(seconds)``. A job that raises is logged and tried again after a
bounded back-off; the loop itself never ends except by cancellation, which it lets through at once
(it waits with ``waiting.woken_within``, never ``asyncio.wait_for``; see there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn

from erpilot_platform.waiting import woken_within

log = logging.getLogger(__name__)
MAX_RETRY_SECONDS = 5.0

Waiter = Callable[[asyncio.Event, float], Awaitable[bool]]


@dataclass(frozen=True)
class Soon:
    """What a job may return: run the next pass within ``seconds`` (0: at once) instead of after the interval."""

    seconds: float


def retry_wait(failures: int, first: float, most: float) -> float:
    """The wait after ``failures`` passes in a row failed: ``first``, doubling, never more than ``most``."""
    return min(first * 2 ** (failures - 1), most)


def looking_later(delay: float) -> Waiter:
    """A clock for ``every`` on which a wake-up means "look ``delay`` seconds from now", not "look now".

    For a job that acts only on rows once they are ``delay`` old (the agent's reconciler and run resumer):
    woken by every write that may start such a row, it looks when the row could first be due, and while
    writes keep coming it looks once per ``delay``, not once per write. A nearer pass (``Soon``) stays.
    """
    async def wait(event: asyncio.Event, seconds: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        if not await woken_within(event, seconds):
            return False
        await asyncio.sleep(max(0.0, min(deadline - loop.time(), delay)))
        return True

    return wait


async def every(interval: float, job: Callable[[], Awaitable[object]], *, wake: asyncio.Event | None = None,
                name: str | None = None, retry_after: float | None = None, max_retry_after: float | None = None,
                failure_level: int = logging.WARNING, wait: Waiter = woken_within) -> NoReturn:
    """Run ``job`` forever, ``interval`` seconds apart (less when woken or when it returns ``Soon``).

    Any other return value (a count, None) means "the interval". After a failure the next pass waits
    ``retry_after`` (default ``interval``), doubling with each failure in a row up to ``max_retry_after``
    (default the larger of ``interval`` and ``MAX_RETRY_SECONDS``); a wake-up still cuts that short.
    ``wait`` is the clock (tests give a fake one).
    """
    name = name or getattr(job, "__qualname__", "background job")
    wake = wake if wake is not None else asyncio.Event()
    first = interval if retry_after is None else retry_after
    most = max(interval, MAX_RETRY_SECONDS) if max_retry_after is None else max_retry_after
    failures = 0
    while True:
        wake.clear()  # before the pass: a wake-up during it is not lost
        try:
            answer = await job()
        except Exception:  # a CancelledError is not an Exception: it ends the loop
            failures += 1
            seconds = retry_wait(failures, first, most)
            log.log(failure_level, "%s failed (%d in a row); trying again in %.2fs", name, failures, seconds,
                    exc_info=True)
        else:
            failures = 0
            seconds = answer.seconds if isinstance(answer, Soon) else interval
        # A set event or ``Soon(0)`` does not suspend the task: yield once per pass, so a job that is
        # woken all the time still lets the event loop (and a cancellation) in.
        await asyncio.sleep(0)
        if seconds > 0:
            await wait(wake, seconds)
