"""The approval service's calls to the ERP (the ``ErpPort`` of ``service_layer.ports``): the ledger's record
of a prepared operation, and a fresh preview for an edited operation."""

from __future__ import annotations

from faststream.nats import NatsBroker

from erpilot_contracts import requests
from erpilot_contracts.erp.v1 import GetPreparedOperationV1, PreparedOperationV1, PreparedRecordV1, PrepareOperationV1
from erpilot_platform.broker import ReplyError, ServiceUnavailable, call


class ErpClient:
    def __init__(self, broker: NatsBroker, *, timeout: float = 10.0):
        self.broker = broker
        self.timeout = timeout

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        """``cmd.erp.prepare`` through JetStream; ``ReplyError`` when the ERP refuses, ServiceUnavailable if
        it does not answer."""
        return await call(self.broker, requests.ERP_PREPARE, cmd, timeout=self.timeout)

    async def prepared(self, operation_id: str) -> PreparedRecordV1 | None:
        """The ledger's record of ``operation_id`` (None: never prepared); ServiceUnavailable if no answer."""
        try:
            query = GetPreparedOperationV1(operation_id=operation_id)
            return await call(self.broker, requests.ERP_PREPARED, query, timeout=self.timeout)
        except ReplyError as refusal:
            if refusal.error.code == "not_found":
                return None
            # Any other answer is the ERP's trouble, not the request's: the command is retried.
            raise ServiceUnavailable(requests.ERP_PREPARED.subject, str(refusal)) from refusal
