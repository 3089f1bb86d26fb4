"""Finds calls whose commit answer never arrived (crash, timeout) and settles them with the ERP."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from erpilot_agent.service_layer.tool_calls import ToolCallService

log = logging.getLogger(__name__)
STUCK_STATES = ("approved", "executing")


async def reconcile_once(service: ToolCallService, *, older_than: timedelta) -> int:
    async with service.uow() as uow:
        records = await uow.calls.stuck(STUCK_STATES, older_than)
    for record in records:
        try:
            await service.reconcile(record)
        except Exception:
            log.warning("could not reconcile call %s yet", record.call_id, exc_info=True)
    return len(records)


async def run_reconciler(service: ToolCallService, *, older_than: timedelta, interval: float = 1.0) -> None:
    while True:
        try:
            await reconcile_once(service, older_than=older_than)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("reconciler pass failed", exc_info=True)
        await asyncio.sleep(interval)
