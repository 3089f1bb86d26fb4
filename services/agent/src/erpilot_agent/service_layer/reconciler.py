"""Finds calls whose commit answer never arrived (crash, timeout) and settles them with the ERP."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from erpilot_agent.adapters import repository
from erpilot_agent.service_layer.tool_calls import ToolCallService

log = logging.getLogger(__name__)
STUCK_STATES = ("approved", "executing")


async def reconcile_once(service: ToolCallService, *, older_than: timedelta) -> int:
    cutoff = repository.now() - older_than
    async with service.engine.connect() as conn:
        rows = [row for state in STUCK_STATES for row in await repository.calls_in_status(conn, state, cutoff)]
    for row in rows:
        try:
            await service.reconcile(row)
        except Exception:
            log.warning("could not reconcile call %s yet", row.call_id, exc_info=True)
    return len(rows)


async def run_reconciler(service: ToolCallService, *, older_than: timedelta, interval: float = 1.0) -> None:
    while True:
        try:
            await reconcile_once(service, older_than=older_than)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("reconciler pass failed", exc_info=True)
        await asyncio.sleep(interval)
