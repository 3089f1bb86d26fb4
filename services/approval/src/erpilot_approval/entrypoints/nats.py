"""NATS endpoints of the approval service: contracts in, use cases out."""

from __future__ import annotations

from erpilot_approval.service_layer import (
    audit_queries,
    bulk_decisions,
    decisions,
    edits,
    mapping,
    queries,
    requests,
    withdrawals,
)
from erpilot_approval.service_layer.ports import Ports
from erpilot_contracts import requests as endpoints
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.approval.v1 import (
    AuditQueryV1,
    DecideManyV1,
    DecideV1,
    EditApprovalV1,
    GetApprovalV1,
    ListApprovalsV1,
    PolicyQueryV1,
    RequestApprovalV1,
    WithdrawApprovalsV1,
)
from erpilot_contracts.base import ReplyV1
from erpilot_platform.endpoints import ServiceBus


def register(bus: ServiceBus, ports: Ports) -> None:
    """Commands and queries alike run on ``ports`` (the queries read what ``ports.store`` has committed)."""
    policy = ports.policy

    @bus.serve(endpoints.APPROVAL_POLICY, description="The policy in force, per tool.")
    async def policy_view(query: PolicyQueryV1) -> ReplyV1:
        return ReplyV1.success(mapping.policy_view(policy, query.tool))

    @bus.serve(endpoints.APPROVAL_REQUEST,
               description="Store a pending approval under the policy in force (idempotent by operation_id).")
    async def request_approval(cmd: RequestApprovalV1) -> ReplyV1:
        return await requests.request_approval(cmd, ports)

    @bus.serve(endpoints.APPROVAL_DECIDE,
               description="Approve, reject or cancel; exactly one decision wins; signs the grant.")
    async def decide(cmd: DecideV1) -> ReplyV1:
        return await decisions.decide(cmd, ports)

    @bus.serve(endpoints.APPROVAL_DECIDE_MANY,
               description="One action on several approvals: all decided in one transaction, or none.")
    async def decide_many(cmd: DecideManyV1) -> ReplyV1:
        return await bulk_decisions.decide_many(cmd, ports)

    @bus.serve(endpoints.APPROVAL_EDIT, description="Replace the arguments: a new pending version supersedes this one.")
    async def edit(cmd: EditApprovalV1) -> ReplyV1:
        return await edits.edit(cmd, ports)

    @bus.serve(endpoints.APPROVAL_WITHDRAW,
               description="The owner cancelled a waiting run: withdraw its pending approvals.")
    async def withdraw(cmd: WithdrawApprovalsV1) -> ReplyV1:
        return await withdrawals.withdraw_approvals(cmd, ports)

    @bus.event(subjects.AGENT_EVT_RUN_CANCELLED, RunCancelledV1,
               description="The agent recorded a run's cancel: withdraw the owner's pending approvals of its calls.")
    async def run_cancelled(event: RunCancelledV1) -> None:
        await withdrawals.withdraw_cancelled_run(event, ports)

    @bus.serve(endpoints.APPROVAL_GET, description="One approval with its decision.")
    async def get_approval(query: GetApprovalV1) -> ReplyV1:
        return await queries.get_approval(ports.store, query)

    @bus.serve(endpoints.APPROVAL_AUDIT, description="Audit log rows (admins).")
    async def audit(query: AuditQueryV1) -> ReplyV1:
        return await audit_queries.audit_rows(ports.store, query)

    @bus.serve(endpoints.APPROVAL_LIST, description="Approvals this person may decide.")
    async def list_approvals(query: ListApprovalsV1) -> ReplyV1:
        return await queries.list_approvals(ports.store, query)
