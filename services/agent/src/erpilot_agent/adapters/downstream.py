"""The agent's calls to the ERP and the approval service, over NATS."""

from __future__ import annotations

from faststream.nats import NatsBroker

from erpilot_contracts import requests
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
from erpilot_contracts.requests import Endpoint, Rep, Req
from erpilot_platform.broker import ReplyError, call, send

# A service answered with an error that is not a business outcome (e.g. invalid grant).
DownstreamError = ReplyError


class Downstream:
    def __init__(self, broker: NatsBroker, *, timeout: float = 15.0):
        self.broker = broker
        self.timeout = timeout

    async def _call(self, endpoint: Endpoint[Req, Rep], payload: Req) -> Rep:
        return await call(self.broker, endpoint, payload, timeout=self.timeout)

    async def policy_view(self) -> PolicyViewV1:
        """The policy in force for every tool."""
        return await self._call(requests.APPROVAL_POLICY, PolicyQueryV1())

    async def policy(self, tool: str) -> ToolPolicyV1:
        view = await self._call(requests.APPROVAL_POLICY, PolicyQueryV1(tool=tool))
        return view.tools[0]

    async def read(self, cmd: ExecuteToolV1) -> ToolResultV1:
        return await self._call(requests.ERP_READ, cmd)

    async def draft(self, cmd: ExecuteToolV1) -> ToolResultV1:
        return await self._call(requests.ERP_DRAFT, cmd)

    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        """The ERP's answer as is: ``ok`` with the preview, or a business rejection."""
        return await send(self.broker, requests.ERP_PREPARE, cmd, timeout=self.timeout)

    async def request_approval(self, cmd: RequestApprovalV1) -> ApprovalRecordV1:
        return await self._call(requests.APPROVAL_REQUEST, cmd)

    async def commit(self, operation_id: str, grant: GrantV1) -> OperationStatusV1:
        cmd = CommitOperationV1(operation_id=operation_id, grant=grant)
        return await self._call(requests.ERP_COMMIT, cmd)

    async def operation_status(self, operation_id: str) -> OperationStatusV1:
        query = GetOperationV1(operation_id=operation_id)
        return await self._call(requests.ERP_OPERATION, query)
