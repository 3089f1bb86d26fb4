"""Process lifecycle shared by every NATS service: connect (retrying), declare streams, start the
endpoints and background loops, and stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from contextlib import suppress

from faststream.nats import NatsBroker
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.subjects import ping_subject
from erpilot_platform.broker import ServiceBus, ensure_streams

log = logging.getLogger(__name__)
Background = Callable[[], Awaitable[None]]


class PingV1(Message):
    """Readiness probe: every replica answers if it can reach its database."""


def register_ping(bus: ServiceBus, engine: AsyncEngine | None) -> None:
    @bus.query(ping_subject(bus.service), PingV1, description="Readiness: broker and database reachable.")
    async def ping(_: PingV1) -> ReplyV1:
        if engine is not None:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        return ReplyV1.success({"service": bus.service, "database": "ok" if engine is not None else "n/a"})


async def connect_with_retry(broker: NatsBroker, *, deadline_seconds: float = 120.0) -> None:
    """Connect, retrying while NATS is still starting (``erpilot up`` starts everything at once)."""
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + deadline_seconds
    delay = 0.2
    while True:
        try:
            await broker.connect()
            return
        except Exception as exc:
            if loop.time() > give_up_at:
                raise RuntimeError(f"could not connect to NATS: {exc}") from exc
            log.info("NATS not reachable yet (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


async def serve(broker: NatsBroker, *, background: list[Background] = (), on_stop: list[Background] = ()) -> None:
    """Run until SIGTERM/SIGINT: endpoints plus background loops; a crashed loop stops the process."""
    await connect_with_retry(broker)
    await ensure_streams(broker)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks = [asyncio.create_task(job(), name=getattr(job, "__name__", "background")) for job in background]
    stopper = asyncio.create_task(stop.wait())
    log.info("service started")
    done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        if task is not stopper and task.exception():
            log.error("background task %s crashed", task.get_name(), exc_info=task.exception())
    for task in tasks:
        task.cancel()
    for task in tasks:
        with suppress(asyncio.CancelledError, Exception):
            await task
    await broker.stop()
    for job in on_stop:
        await job()
    log.info("service stopped")
    crashed = [t for t in done if t is not stopper]
    if crashed:
        raise SystemExit(1)
