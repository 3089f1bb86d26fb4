"""NATS endpoints of the approval service."""

from __future__ import annotations

from erpilot_approval.domain.policy import Policy
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import PolicyQueryV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform.broker import ServiceBus


def register(bus: ServiceBus, engine, policy: Policy) -> None:
    @bus.query(subjects.APPROVAL_QUERY_POLICY, PolicyQueryV1, description="The policy in force, per tool.")
    async def policy_view(query: PolicyQueryV1) -> ReplyV1:
        return ReplyV1.success(policy.view(query.tool))
