"""PostgreSQL ``LISTEN``: a loop told by the database that something changed, instead of polling it (issue 13).

A ``Listener`` holds one dedicated connection (not one of the engine's pool) that listens on a channel;
the writer's transaction notifies it (``pg_notify``, here from a trigger), and PostgreSQL delivers the
notification only if and when that transaction commits, to every replica's listener alike. So a loop
that must learn of another replica's rows (the expiry sweeper: a deadline stored by a replica that then
died) can sleep until it is told, as long as ``listening`` is true. While it is not (starting up, the
database away, the connection lost) nothing is delivered, so the loop must poll as before; ``on_change`` is
called whenever listening starts or stops, so the loop looks again at once and learns which case it is in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import NoReturn

import asyncpg
from sqlalchemy.engine import make_url

from erpilot_platform.loops import retry_wait
from erpilot_platform.waiting import woken_within

log = logging.getLogger(__name__)
# A connection can die unnoticed (no termination callback); look at it this often while listening.
CHECK_SECONDS = 30.0
RETRY_FIRST_SECONDS, RETRY_MOST_SECONDS = 0.5, 5.0


def asyncpg_dsn(libpq_url: str) -> str:
    """A libpq URL (``postgresql+asyncpg://…`` too) as asyncpg's ``connect`` takes it."""
    return make_url(libpq_url).set(drivername="postgresql").render_as_string(hide_password=False)


class Listener:
    """Listens on ``channel`` forever (``run``); calls ``on_change`` on each notification and whenever
    ``listening`` changes."""

    def __init__(self, libpq_url: str, channel: str, on_change: Callable[[], None], *,
                 application_name: str = "erpilot-listener"):
        self.dsn, self.channel, self.on_change = asyncpg_dsn(libpq_url), channel, on_change
        self.application_name = application_name
        self.listening = False

    def _set_listening(self, value: bool) -> None:
        if value != self.listening:
            self.listening = value
            self.on_change()

    async def run(self) -> NoReturn:
        failures = 0
        while True:
            try:
                await self._listen_until_lost()
                failures = 0
            except Exception:  # a CancelledError is not an Exception: it ends the loop
                failures += 1
                log.warning("not listening on %s (%d failures in a row)", self.channel, failures, exc_info=True)
            await asyncio.sleep(retry_wait(max(failures, 1), RETRY_FIRST_SECONDS, RETRY_MOST_SECONDS))

    async def _listen_until_lost(self) -> None:
        connection = await asyncpg.connect(self.dsn, server_settings={"application_name": self.application_name})
        lost = asyncio.Event()
        try:
            connection.add_termination_listener(lambda _: lost.set())
            await connection.add_listener(self.channel, lambda *_: self.on_change())
            self._set_listening(True)  # and the loop looks: what was stored while nobody listened
            while not connection.is_closed():
                await woken_within(lost, CHECK_SECONDS)
            log.warning("lost the connection listening on %s", self.channel)
        finally:
            self._set_listening(False)
            if not connection.is_closed():
                connection.terminate()
