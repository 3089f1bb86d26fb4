"""NATS endpoints of the ERP: translate contracts into use-case calls."""

from __future__ import annotations

from erpilot_contracts import subjects
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_erp.service_layer.reads import run_read_tool
from erpilot_platform.broker import ServiceBus


def register(bus: ServiceBus, engine) -> None:
    @bus.query(subjects.ERP_QUERY_READ, ExecuteToolV1, description="Run a read tool against the ledger.")
    async def read_tool(cmd: ExecuteToolV1) -> ReplyV1:
        if get_tool(cmd.tool).kind is not ToolKind.READ:
            return ReplyV1.failure("not_a_read_tool", f"{cmd.tool} is not a read tool", 422)
        return ReplyV1.success(await run_read_tool(engine, cmd))
