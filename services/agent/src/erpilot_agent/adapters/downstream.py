"""The agent's calls to the ERP and the approval service, over NATS."""

from __future__ import annotations

from typing import TypeVar

from faststream.nats import NatsBroker
from pydantic import BaseModel

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import (
    ApprovalRecordV1,
    GrantV1,
    PolicyQueryV1,
    PolicyViewV1,
    RequestApprovalV1,
    ToolPolicyV1,
)
from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.erp.v1 import (
    CommitOperationV1,
    ExecuteToolV1,
    GetOperationV1,
    OperationStatusV1,
    PrepareOperationV1,
    ToolResultV1,
)
from erpilot_platform.broker import ReplyError, call, request

T = TypeVar("T", bound=BaseModel)
# A service answered with an error that is not a business outcome (e.g. invalid grant).
DownstreamError = ReplyError


class Downstream:
    def __init__(self, broker: NatsBroker, *, timeout: float = 15.0):
        self.broker = broker
        self.timeout = timeout

    async def _call(self, subject: str, payload: Message, reply_model: type[T], *, durable: bool) -> T:
        return await call(self.broker, subject, payload, reply_model, durable=durable, timeout=self.timeout)

    async def policy_view(self) -> PolicyViewV1:
        """The policy in force for every tool."""
        return await self._call(subjects.APPROVAL_QUERY_POLICY, PolicyQueryV1(), PolicyViewV1, durable=False)

    async def policy(self, tool: str) -> ToolPolicyV1:
        view = await self._call(subjects.APPROVAL_QUERY_POLICY, PolicyQueryV1(tool=tool), PolicyViewV1, durable=False)
        return view.tools[0]

    async def read(self, cmd: ExecuteToolV1) -> ToolResultV1:
        return await self._call(subjects.ERP_QUERY_READ, cmd, ToolResultV1, durable=False)

    async def draft(self, cmd: ExecuteToolV1) -> ToolResultV1:
        return await self._call(subjects.ERP_CMD_DRAFT, cmd, ToolResultV1, durable=True)

    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        """The ERP's answer as is: ``ok`` with the preview, or a business rejection."""
        return await request(self.broker, subjects.ERP_CMD_PREPARE, cmd, durable=True, timeout=self.timeout)

    async def request_approval(self, cmd: RequestApprovalV1) -> ApprovalRecordV1:
        return await self._call(subjects.APPROVAL_CMD_REQUEST, cmd, ApprovalRecordV1, durable=True)

    async def commit(self, operation_id: str, grant: GrantV1) -> OperationStatusV1:
        cmd = CommitOperationV1(operation_id=operation_id, grant=grant)
        return await self._call(subjects.ERP_CMD_COMMIT, cmd, OperationStatusV1, durable=True)

    async def operation_status(self, operation_id: str) -> OperationStatusV1:
        query = GetOperationV1(operation_id=operation_id)
        return await self._call(subjects.ERP_QUERY_OPERATION, query, OperationStatusV1, durable=False)
