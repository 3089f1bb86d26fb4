"""Finds calls whose commit answer never arrived (crash, timeout) and settles them with the ERP."""

from __future__ import annotations

import logging
from datetime import timedelta

from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_platform.loops import every

log = logging.getLogger(__name__)
STUCK_STATES = ("approved", "executing")


async def reconcile_once(service: ToolCallService, *, older_than: timedelta) -> int:
    async with service.uow(read_only=True) as uow:
        records = await uow.calls.stuck(STUCK_STATES, older_than)
    for record in records:
        try:
            await service.reconcile(record)
        except Exception:
            log.warning("could not reconcile call %s yet", record.call_id, exc_info=True)
    return len(records)


async def run_reconciler(service: ToolCallService, *, older_than: timedelta, interval: float = 1.0) -> None:
    await every(interval, lambda: reconcile_once(service, older_than=older_than), name="reconciler pass")
