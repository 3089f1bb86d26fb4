"""A NATS-level duplicate injector for e2e tests: every message published on ``erpilot.v1.>`` is
delivered again, twice: one copy at once and one up to 500 ms later.

The copies are real second deliveries, not something JetStream could absorb:
- ``Nats-Msg-Id`` is dropped, so the stream's de-duplication window does not swallow the copy: a command,
  an outbox event or a session event is stored in its stream a second and third time and each durable
  consumer gets every copy;
- every other header travels with the copy, ``reply_to`` (faststream's JetStream request inbox) included,
  so a service answers the copy too, to the same inbox (the caller keeps the first answer);
- a query (core request/reply) keeps its reply subject for the same reason; a JetStream publish's own
  reply subject (its PubAck inbox) is not copied, the copy is a plain publish into the stream's subject.
Copies carry the header ``Erpilot-Test-Copy`` so the injector never copies its own copies.

Use as a context manager around the traffic to duplicate. Leaving it publishes every late copy still
waiting, then waits until every durable consumer has handled (and acknowledged) everything, copies included.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from typing import Any

import nats
from nats.aio.msg import Msg

SUBJECTS = "erpilot.v1.>"
COPY_HEADER = "Erpilot-Test-Copy"
LATE_MAX_SECONDS = 0.5
_STREAMS = ("ERPILOT_COMMANDS", "ERPILOT_EVENTS")


class DuplicateInjector:
    def __init__(self, nats_url: str, *, late_max_seconds: float = LATE_MAX_SECONDS, seed: int = 11,
                 settle_timeout: float = 90.0):
        self.nats_url = nats_url
        self.settle_timeout = settle_timeout
        self.late_max_seconds = late_max_seconds
        self.random = random.Random(seed)
        self.copied: Counter[str] = Counter()  # per kind of subject (cmd, evt, query, sessions, dlq)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="duplicate-injector", daemon=True)
        self._nc: Any = None
        self._late: set[asyncio.Task] = set()
        self._active = False

    # --- lifecycle (called from the test's thread) ------------------------------------------------
    def __enter__(self) -> DuplicateInjector:
        self._thread.start()
        self._run(self._connect())
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            self._run(self._stop_copying())
            if exc_type is None:
                self._run(self._settled(self.settle_timeout), timeout=self.settle_timeout + 10)
        finally:
            self._run(self._nc.drain())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def _run(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # --- copying (in the injector's own event loop) ------------------------------------------------
    async def _connect(self) -> None:
        self._nc = await nats.connect(self.nats_url, name="duplicate-injector")
        self._active = True
        await self._nc.subscribe(SUBJECTS, cb=self._on_message)
        await self._nc.flush()

    async def _on_message(self, msg: Msg) -> None:
        if not self._active or (msg.headers and COPY_HEADER in msg.headers):
            return
        kind = msg.subject.split(".")[2]
        headers = {k: v for k, v in (msg.headers or {}).items() if k != "Nats-Msg-Id"}
        reply = msg.reply if kind == "query" else ""
        await self._copy(msg.subject, msg.data, reply, {**headers, COPY_HEADER: "now"}, kind)
        task = asyncio.create_task(self._late_copy(msg.subject, msg.data, reply, {**headers, COPY_HEADER: "late"},
                                                   kind, self.random.uniform(0.0, self.late_max_seconds)))
        self._late.add(task)
        task.add_done_callback(self._late.discard)

    async def _late_copy(self, subject: str, data: bytes, reply: str, headers: dict, kind: str, delay: float) -> None:
        await asyncio.sleep(delay)
        await self._copy(subject, data, reply, headers, kind)

    async def _copy(self, subject: str, data: bytes, reply: str, headers: dict, kind: str) -> None:
        await self._nc.publish(subject, data, reply=reply, headers=headers)
        self.copied[kind] += 1

    async def _stop_copying(self) -> None:
        self._active = False
        while self._late:
            await asyncio.gather(*list(self._late), return_exceptions=True)
        await self._nc.flush()

    # --- quiescence ----------------------------------------------------------------------------------
    async def _settled(self, timeout: float) -> None:
        """Every durable consumer of the command and event streams has nothing pending or unacknowledged,
        twice in a row (handling a copy could, in a faulty system, publish more)."""
        js = self._nc.jetstream()
        deadline = time.monotonic() + timeout
        quiet = 0
        last: list[tuple[str, int, int]] = []
        while quiet < 2:
            last = []
            for stream in _STREAMS:
                for info in await js.consumers_info(stream):
                    last.append((info.name, info.num_pending, info.num_ack_pending))
            quiet = quiet + 1 if all(pending == 0 and acking == 0 for _, pending, acking in last) else 0
            if time.monotonic() > deadline:
                raise AssertionError(f"consumers still busy after {timeout}s: {last}")
            await asyncio.sleep(0.3)
