"""Publishes take turns in the order the turns were reserved (before the commits), not in the order their tasks
get to them (issue 31: a session's events are stored in ``seq`` order)."""

from __future__ import annotations

import asyncio

import pytest

from erpilot_platform.turns import Turns

pytestmark = pytest.mark.unit


async def test_a_later_turn_waits_for_every_earlier_one_whatever_order_they_come_in() -> None:
    turns, order = Turns(), []
    first, second, third = turns.reserve(), turns.reserve(), turns.reserve()

    async def take(turn, name: str) -> None:
        await turn.wait()
        order.append(name)
        await asyncio.sleep(0)
        turn.end()

    # The third and second tasks reach their turns first (their commits answered sooner).
    await asyncio.gather(take(third, "third"), take(second, "second"), take(first, "first"))
    assert order == ["first", "second", "third"]


async def test_a_turn_ended_early_still_keeps_its_place() -> None:
    turns = Turns()
    first, rolled_back, last = turns.reserve(), turns.reserve(), turns.reserve()
    rolled_back.end()  # its transaction rolled back: it publishes nothing
    waiting = asyncio.create_task(last.wait())
    await asyncio.sleep(0.01)
    assert not waiting.done()  # the first has not published yet
    first.end()
    await asyncio.wait_for(waiting, 1)


async def test_a_cancelled_waiter_does_not_break_the_chain() -> None:
    turns = Turns()
    first, cancelled, last = turns.reserve(), turns.reserve(), turns.reserve()
    waiter = asyncio.create_task(cancelled.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    cancelled.end()
    waiting = asyncio.create_task(last.wait())
    await asyncio.sleep(0.01)
    assert not waiting.done()  # the first turn is still held
    first.end()
    await asyncio.wait_for(waiting, 1)
