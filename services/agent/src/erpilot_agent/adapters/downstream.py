"""The agent's calls to the ERP and the approval service, over NATS."""

from __future__ import annotations

import time

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


# How long the agent answers from the policy it asked last. The policy changes only when the approval
# service restarts with another file; an approval stored under another version drops it at once.
POLICY_MAX_AGE_SECONDS = 5.0


class Downstream:
    def __init__(self, broker: NatsBroker, *, timeout: float = 15.0,
                 policy_max_age: float = POLICY_MAX_AGE_SECONDS):
        self.broker = broker
        self.timeout = timeout
        self.policy_max_age = policy_max_age
        self._policy: PolicyViewV1 | None = None
        self._policy_asked_at = 0.0

    async def _call(self, endpoint: Endpoint[Req, Rep], payload: Req) -> Rep:
        return await call(self.broker, endpoint, payload, timeout=self.timeout)

    async def policy_view(self) -> PolicyViewV1:
        """The policy in force for every tool: asked at most every ``policy_max_age`` seconds."""
        if self._policy is None or time.monotonic() - self._policy_asked_at > self.policy_max_age:
            asked_at = time.monotonic()
            self._policy = await self._call(requests.APPROVAL_POLICY, PolicyQueryV1())
            self._policy_asked_at = asked_at
        return self._policy

    async def policy(self, tool: str) -> ToolPolicyV1:
        for item in (await self.policy_view()).tools:
            if item.tool == tool:
                return item
        # Not in the approval service's list (a tool it does not know): it answers for it (a denial).
        view = await self._call(requests.APPROVAL_POLICY, PolicyQueryV1(tool=tool))
        return view.tools[0]

    def policy_version_seen(self, version: str) -> None:
        if self._policy is not None and self._policy.version != version:
            self._policy = None

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
