"""Turns taken in the order they were reserved, whatever order their holders get to them.

The outbox's publishes (issue 31): a unit of work reserves its turn at the end of its work, before its commit,
while it still holds its row locks, and publishes in that turn after the commit. Two transactions of one session
follow one another under the session's row lock, so the later one reserves after the earlier one did, and the
session's events are published in ``seq`` order even when the later task reaches its publish first.
"""

from __future__ import annotations

import asyncio


class Turn:
    """One reserved turn: ``wait`` for the earlier ones, then ``end`` it (also when it publishes nothing)."""

    def __init__(self, after: asyncio.Future[None] | None, done: asyncio.Future[None]):
        self._after = after
        self._done = done

    async def wait(self) -> None:
        """Until every earlier turn ended (a cancelled waiter leaves the chain as it is)."""
        if self._after is not None:
            await asyncio.shield(self._after)

    def end(self) -> None:
        """Let the next turn go, once every earlier one ended (a turn ended early still keeps its place)."""
        if self._done.done():
            return
        if self._after is None or self._after.done():
            self._done.set_result(None)
        else:
            self._after.add_done_callback(lambda _: self._done.done() or self._done.set_result(None))


class Turns:
    """The queue of turns of one process."""

    def __init__(self) -> None:
        self._last: asyncio.Future[None] | None = None

    def reserve(self) -> Turn:
        """The next turn: after every turn reserved so far."""
        done = asyncio.get_running_loop().create_future()
        turn, self._last = Turn(self._last, done), done
        return turn
