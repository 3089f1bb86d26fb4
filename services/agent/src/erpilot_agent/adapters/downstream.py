"""The agent's requests to the ERP (read, draft, prepare) and the approval service (its policy), over NATS.

The agent sends no approval request and no commit: the ERP asks for the approval in the transaction that
prepares the operation, and the approval service sends the commit with the decision."""

from __future__ import annotations

import time

from faststream.nats import NatsBroker

from erpilot_contracts import requests
from erpilot_contracts.approval.v1 import PolicyQueryV1, PolicyViewV1, ToolPolicyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, PreparedOperationV1, PrepareOperationV1, ToolResultV1
from erpilot_contracts.requests import Endpoint, Rep, Req
from erpilot_platform.broker import call

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

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        return await self._call(requests.ERP_PREPARE, cmd)
