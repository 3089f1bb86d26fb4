"""Waiting for a wake-up with a time limit, in a loop that must stop when its task is cancelled.

Not ``asyncio.wait_for``: on Python 3.11 it swallows a cancellation that arrives as the awaited
event is set (it returns the result instead of raising), so a relay or sweeper that is woken often
never stops and its service hangs at shutdown. ``asyncio.timeout`` does not have that flaw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def woken_within(event: asyncio.Event, seconds: float) -> bool:
    """True if ``event`` is set within ``seconds``, False when the time ran out."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """``awaitable``'s result, or ``TimeoutError`` after ``seconds`` (a cancellation always propagates)."""
    async with asyncio.timeout(seconds):
        return await awaitable
