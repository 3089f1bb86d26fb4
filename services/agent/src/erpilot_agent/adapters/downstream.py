"""The agent's calls to the ERP and the approval service, over NATS."""

from __future__ import annotations

from faststream.nats import NatsBroker

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import (
    ApprovalRecordV1,
    GrantV1,
    PolicyQueryV1,
    PolicyViewV1,
    RequestApprovalV1,
    ToolPolicyV1,
)
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import (
    CommitOperationV1,
    ExecuteToolV1,
    GetOperationV1,
    OperationStatusV1,
    PrepareOperationV1,
    ToolResultV1,
)
from erpilot_platform.broker import request


class DownstreamError(RuntimeError):
    """A service answered with an error that is not a business outcome (e.g. invalid grant)."""

    def __init__(self, reply: ReplyV1):
        super().__init__(f"{reply.error.code}: {reply.error.message}")
        self.error = reply.error


class Downstream:
    def __init__(self, broker: NatsBroker, *, timeout: float = 15.0):
        self.broker = broker
        self.timeout = timeout

    async def _data(self, subject: str, payload, *, durable: bool) -> dict:
        reply = await request(self.broker, subject, payload, durable=durable, timeout=self.timeout)
        if not reply.ok:
            raise DownstreamError(reply)
        return reply.data or {}

    async def policy_view(self) -> PolicyViewV1:
        """The policy in force for every tool."""
        return PolicyViewV1.model_validate(
            await self._data(subjects.APPROVAL_QUERY_POLICY, PolicyQueryV1(), durable=False))

    async def policy(self, tool: str) -> ToolPolicyV1:
        view = PolicyViewV1.model_validate(
            await self._data(subjects.APPROVAL_QUERY_POLICY, PolicyQueryV1(tool=tool), durable=False))
        return view.tools[0]

    async def read(self, cmd: ExecuteToolV1) -> ToolResultV1:
        return ToolResultV1.model_validate(await self._data(subjects.ERP_QUERY_READ, cmd, durable=False))

    async def draft(self, cmd: ExecuteToolV1) -> ToolResultV1:
        return ToolResultV1.model_validate(await self._data(subjects.ERP_CMD_DRAFT, cmd, durable=True))

    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        """The ERP's answer as is: ``ok`` with the preview, or a business rejection."""
        return await request(self.broker, subjects.ERP_CMD_PREPARE, cmd, durable=True, timeout=self.timeout)

    async def request_approval(self, cmd: RequestApprovalV1) -> ApprovalRecordV1:
        return ApprovalRecordV1.model_validate(await self._data(subjects.APPROVAL_CMD_REQUEST, cmd, durable=True))

    async def commit(self, operation_id: str, grant: GrantV1) -> OperationStatusV1:
        cmd = CommitOperationV1(operation_id=operation_id, grant=grant)
        return OperationStatusV1.model_validate(await self._data(subjects.ERP_CMD_COMMIT, cmd, durable=True))

    async def operation_status(self, operation_id: str) -> OperationStatusV1:
        query = GetOperationV1(operation_id=operation_id)
        return OperationStatusV1.model_validate(await self._data(subjects.ERP_QUERY_OPERATION, query, durable=False))
