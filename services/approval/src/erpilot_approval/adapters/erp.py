"""The approval service's one call to the ERP (the ``ErpPort`` of ``service_layer.ports``): prepare an edited
operation. The ERP sends the edited version's request back through its outbox (``cmd.approval.request``)."""

from __future__ import annotations

from faststream.nats import NatsBroker

from erpilot_contracts import requests
from erpilot_contracts.erp.v1 import PreparedOperationV1, PrepareOperationV1
from erpilot_platform.broker import call


class ErpClient:
    def __init__(self, broker: NatsBroker, *, timeout: float = 10.0):
        self.broker = broker
        self.timeout = timeout

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        """``cmd.erp.prepare`` through JetStream; ``ReplyError`` when the ERP refuses, ServiceUnavailable if
        it does not answer."""
        return await call(self.broker, requests.ERP_PREPARE, cmd, timeout=self.timeout)
