"""The approval service's calls to the ERP: the ledger's record of a prepared operation, and a fresh
preview for an edited operation."""

from __future__ import annotations

from faststream.nats import NatsBroker

from erpilot_contracts import subjects
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import GetPreparedOperationV1, PreparedRecordV1, PrepareOperationV1
from erpilot_platform.broker import ServiceUnavailable, request


class ErpClient:
    def __init__(self, broker: NatsBroker, *, timeout: float = 10.0):
        self.broker = broker
        self.timeout = timeout

    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        """``cmd.erp.prepare`` through JetStream; the ERP's answer as is (ServiceUnavailable if none)."""
        return await request(self.broker, subjects.ERP_CMD_PREPARE, cmd, durable=True, timeout=self.timeout)

    async def prepared(self, operation_id: str) -> PreparedRecordV1 | None:
        """The ledger's record of ``operation_id`` (None: never prepared); ServiceUnavailable if no answer."""
        reply = await request(self.broker, subjects.ERP_QUERY_PREPARED,
                              GetPreparedOperationV1(operation_id=operation_id), durable=False, timeout=self.timeout)
        if reply.ok:
            return PreparedRecordV1.model_validate(reply.data)
        if reply.error.code == "not_found":
            return None
        raise ServiceUnavailable(subjects.ERP_QUERY_PREPARED, f"{reply.error.code}: {reply.error.message}")
