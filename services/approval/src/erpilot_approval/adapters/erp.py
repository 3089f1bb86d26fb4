"""The approval service's one call to the ERP: a fresh preview for an edited operation."""

from __future__ import annotations

from faststream.nats import NatsBroker

from erpilot_contracts import subjects
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_platform.broker import request


class ErpClient:
    def __init__(self, broker: NatsBroker, *, timeout: float = 10.0):
        self.broker = broker
        self.timeout = timeout

    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        """``cmd.erp.prepare`` through JetStream; the ERP's answer as is (ServiceUnavailable if none)."""
        return await request(self.broker, subjects.ERP_CMD_PREPARE, cmd, durable=True, timeout=self.timeout)
