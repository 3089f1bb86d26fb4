"""Finds calls whose commit answer never arrived (crash, timeout) and settles them with the ERP.

A call is stuck once it stayed ``approved`` or ``executing`` for ``older_than``. A pass reads every call in
flight (read-only), settles the stuck ones and sleeps until the next one could be stuck. With nothing in
flight it sleeps until a commit of this process (``wake``: each one that moves a call commits session
events, so it wakes the outbox relay) and then looks ``older_than`` later (``loops.looking_later``), or
at most ``IDLE_SECONDS``: a call another replica left in flight when it died and never came back (a
replica that restarts reconciles at once). Issue 13: it used to look every second.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_platform.loops import Soon, every, looking_later

log = logging.getLogger(__name__)
STUCK_STATES = ("approved", "executing")
IDLE_SECONDS = 30.0
EPSILON_SECONDS = 0.01
AGAIN_SECONDS = 1.0  # after settling (or failing to settle) stuck calls, look again as soon as before


async def reconcile_once(service: ToolCallService, *, older_than: timedelta) -> int:
    """Settle the calls stuck now; returns how many there were."""
    return (await reconcile_due(service, older_than=older_than))[0]


async def reconcile_due(service: ToolCallService, *, older_than: timedelta) -> tuple[int, Soon | None]:
    """Settle the stuck calls: how many, and when to look again (the next call in flight is stuck) or None."""
    async with service.uow(read_only=True) as uow:
        in_flight = await uow.calls.stuck(STUCK_STATES, timedelta(0))
    now = datetime.now(UTC)
    later, settled = [], 0
    for record in in_flight:
        if (due_in := record.updated_at + older_than - now) > timedelta(0):
            later.append(due_in.total_seconds() + EPSILON_SECONDS)
            continue
        settled += 1
        try:
            await service.reconcile(record)
        except Exception:
            log.warning("could not reconcile call %s yet", record.call_id, exc_info=True)
    if settled:  # a call still in flight (the ERP away, an unknown outcome) is retried as before
        later.append(AGAIN_SECONDS)
    return settled, Soon(min(later)) if later else None


async def run_reconciler(service: ToolCallService, *, older_than: timedelta, wake: asyncio.Event | None = None,
                         interval: float = IDLE_SECONDS) -> None:
    async def reconcile() -> Soon | None:
        return (await reconcile_due(service, older_than=older_than))[1]

    await every(interval, reconcile, wake=wake,
                wait=looking_later(older_than.total_seconds()), name="reconciler pass")
