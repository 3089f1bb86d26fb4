"""Process lifecycle shared by every NATS service: connect (retrying), verify the JetStream streams and
consumers `erpilot migrate` declared, start the
endpoints and background loops, and stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from faststream.nats import NatsBroker
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.subjects import ping_subject
from erpilot_platform import jetstream
from erpilot_platform.broker import watch_consumer_leaders
from erpilot_platform.endpoints import ServiceBus

log = logging.getLogger(__name__)
STOP_SECONDS = 10.0
EVENT_LOOP_VARIABLE = "ERPILOT_EVENT_LOOP"  # "uvloop" (the default where it is installed) or "asyncio"


def run_service(main: Coroutine[Any, Any, None]) -> None:
    """Run a service's main coroutine to the end on uvloop (issue 13: a cycle is I/O bound in the event loop,
    the socket writes and wake-ups of asyncpg and nats-py; uvloop's libuv loop does them for a fraction of the
    CPU of asyncio's selector loop). ``ERPILOT_EVENT_LOOP=asyncio`` keeps the standard loop, e.g. to compare."""
    choice = os.environ.get(EVENT_LOOP_VARIABLE, "uvloop").strip().lower()
    if choice not in ("uvloop", "asyncio"):
        raise SystemExit(f"{EVENT_LOOP_VARIABLE} must be uvloop or asyncio, not {choice!r}")
    factory = None
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:  # a platform uvloop does not build on (Windows): the standard loop
            uvloop = None
        factory = uvloop.new_event_loop if uvloop is not None else None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)
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


@dataclass
class ServiceApp:
    """A composed service: its broker with endpoints registered, its engine and background loops.

    ``start``/``stop`` let tests run a service inside their own event loop; ``serve`` runs it as a process.
    """

    name: str
    broker: NatsBroker
    engine: AsyncEngine | None = None
    background: list[Background] = field(default_factory=list)
    _tasks: list[asyncio.Task] = field(default_factory=list)

    async def start(self) -> None:
        await connect_with_retry(self.broker)
        # Streams and consumers are declared by `erpilot migrate`; a service only checks them.
        await jetstream.verify(self.broker.config.connection_state.stream, jetstream.subscribed_durables(self.broker),
                               replicas=jetstream.replicas_from_env())
        await self.broker.start()
        await watch_consumer_leaders(self.broker)  # the pull subscriptions exist once the broker started
        self._tasks = [asyncio.create_task(job(), name=getattr(job, "__name__", "background"))
                       for job in self.background]
        log.info("service %s started", self.name)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            # A loop that ignored its cancellation must not hang the stop: name it and go on.
            _, stuck = await asyncio.wait(self._tasks, timeout=STOP_SECONDS)
            for task in stuck:
                log.error("background task %s did not stop within %ss of its cancellation", task.get_name(),
                          STOP_SECONDS)
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.warning("background task %s ended with an error", task.get_name(), exc_info=task.exception())
        await self.broker.stop()
        if self.engine is not None:
            await self.engine.dispose()
        log.info("service %s stopped", self.name)


async def serve(app: ServiceApp) -> None:
    """Run until SIGTERM/SIGINT; a crashed background loop stops the process with status 1."""
    await app.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopper, *app._tasks], return_when=asyncio.FIRST_COMPLETED)
    crashed = [task for task in done if task is not stopper]
    for task in crashed:
        log.error("background task %s crashed", task.get_name(), exc_info=task.exception())
    await app.stop()
    if crashed:
        raise SystemExit(1)
