"""What JetStream says of the delivery a durable handler is handling: how many times it came, when the stream stored
it, and that the handler is still at it (so it is not redelivered meanwhile)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

_stored_at: ContextVar[datetime | None] = ContextVar("erpilot_stored_at", default=None)


def stored_at(default: datetime | None = None) -> datetime:
    """When JetStream stored the message the current durable handler handles: a time no publisher chooses (a
    field of the message, such as ``cancelled_at``, its publisher does). Outside a durable handler: ``default``,
    else now."""
    return _stored_at.get() or default or datetime.now(UTC)


@contextmanager
def handling(raw: Any) -> Iterator[None]:
    """While the block runs, ``stored_at`` answers for ``raw``, the JetStream message being handled."""
    token = _stored_at.set(_stored_timestamp(raw))
    try:
        yield
    finally:
        _stored_at.reset(token)


def delivery_count(message: Any) -> int:
    try:
        return int(message.raw_message.metadata.num_delivered)
    except Exception:
        return 1


async def keep_in_progress(message: Any, every: float) -> None:
    """Tell JetStream the message is still being worked on, so it is not redelivered meanwhile."""
    while True:
        await asyncio.sleep(every)
        try:
            await message.in_progress()
        except Exception:  # best effort: the worst case is a redelivery the idempotent handler absorbs
            return


def _stored_timestamp(raw: Any) -> datetime | None:
    try:
        return raw.metadata.timestamp
    except Exception:  # not a JetStream message (tests, a core request)
        return None
