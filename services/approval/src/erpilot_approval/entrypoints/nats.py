"""NATS endpoints of the approval service: contracts in, use cases out."""

from __future__ import annotations

from erpilot_approval.service_layer import (
    audit_queries,
    bulk_decisions,
    chat,
    decisions,
    delegations,
    edits,
    email_links,
    mapping,
    queries,
    requests,
    standing,
    withdrawals,
)
from erpilot_approval.service_layer.ports import Ports
from erpilot_contracts import requests as endpoints
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.approval.chat import ChatActionV1
from erpilot_contracts.approval.links import DecideByLinkV1, EmailLinkV1, EmailLinkViewV1
from erpilot_contracts.approval.standing import (
    GiveStandingApprovalV1,
    ListStandingApprovalsV1,
    RevokeStandingApprovalV1,
    StandingApprovalPageV1,
    StandingApprovalV1,
)
from erpilot_contracts.approval.v1 import (
    ApprovalPageV1,
    ApprovalRecordV1,
    AuditPageV1,
    AuditQueryV1,
    DecideManyV1,
    DecideV1,
    DecisionsV1,
    DelegationPageV1,
    DelegationV1,
    EditApprovalV1,
    FindReferringApprovalV1,
    GetApprovalV1,
    GiveDelegationV1,
    ListApprovalsV1,
    ListDelegationsV1,
    PolicyQueryV1,
    PolicyViewV1,
    ReferringApprovalV1,
    RequestApprovalV1,
    RevokeDelegationV1,
)
from erpilot_platform.deliveries import stored_at
from erpilot_platform.endpoints import ServiceBus


def register(bus: ServiceBus, ports: Ports, *, chat_secret: bytes | None = None, wake=lambda: None) -> None:
    """Commands and queries alike run on ``ports`` (the queries read what ``ports.uow`` has committed). Each
    handler returns its endpoint's reply model or raises ``Refused``; the ServiceBus builds the ``ReplyV1``.
    ``chat_secret``: ERPILOT_CHAT_SIGNING_SECRET; ``wake``: the webhook dispatcher (a chat card's update)."""
    policy = ports.policy

    @bus.serve(endpoints.APPROVAL_POLICY, description="The policy in force, per tool.")
    async def policy_view(query: PolicyQueryV1) -> PolicyViewV1:
        return mapping.policy_view(policy, query.tool)

    @bus.serve(endpoints.APPROVAL_REQUEST,
               description="The ledger asks (from its outbox) for a decision on an operation it prepared: store "
                           "the pending approval under the policy in force (idempotent by operation_id).")
    async def request_approval(cmd: RequestApprovalV1) -> ApprovalRecordV1:
        return await requests.request_approval(cmd, ports)

    @bus.serve(endpoints.APPROVAL_DECIDE,
               description="Approve, reject or cancel; exactly one decision wins; an approval signs the grant and "
                           "sends cmd.erp.commit.")
    async def decide(cmd: DecideV1) -> ApprovalRecordV1:
        return await decisions.decide(cmd, ports)

    @bus.serve(endpoints.APPROVAL_EMAIL_LINK,
               description="What an approval email's signed link stands for (person, action, preview); decides "
                           "nothing: mail scanners open links.")
    async def email_link(query: EmailLinkV1) -> EmailLinkViewV1:
        return await email_links.email_link(query, ports)

    @bus.serve(endpoints.APPROVAL_DECIDE_BY_LINK,
               description="An approval email's link, confirmed: decide as the person this service signed it for, "
                           "once, through the same decision as req.approval.decide.")
    async def decide_by_link(cmd: DecideByLinkV1) -> ApprovalRecordV1:
        return await email_links.decide_by_link(cmd, ports)

    @bus.serve(endpoints.APPROVAL_CHAT_ACTION,
               description="A chat card's button as the platform sent it: Slack's v0 signature and replay window "
                           "checked here, the chat user mapped to a person, decided like req.approval.decide.")
    async def chat_action(cmd: ChatActionV1) -> ApprovalRecordV1:
        return await chat.chat_action(cmd, ports, chat_secret, wake)

    @bus.serve(endpoints.APPROVAL_DECIDE_MANY,
               description="One action on several approvals: all decided in one transaction, or none.")
    async def decide_many(cmd: DecideManyV1) -> DecisionsV1:
        return await bulk_decisions.decide_many(cmd, ports)

    @bus.serve(endpoints.APPROVAL_EDIT, description="Replace the arguments: the ledger prepares a new pending "
                                                    "version that supersedes this one.")
    async def edit(cmd: EditApprovalV1) -> ApprovalRecordV1:
        return await edits.edit(cmd, ports)

    @bus.event(subjects.AGENT_EVT_RUN_CANCELLED, RunCancelledV1,
               description="The agent recorded a run's cancel (with the owner's assertion): withdraw the owner's "
                           "pending approvals of its calls.")
    async def run_cancelled(event: RunCancelledV1) -> None:
        await withdrawals.withdraw_cancelled_run(event, ports, stored_at=stored_at())

    @bus.serve(endpoints.APPROVAL_GET, description="One approval with its decision.")
    async def get_approval(query: GetApprovalV1) -> ApprovalRecordV1:
        return await queries.get_approval(ports, query)

    @bus.serve(endpoints.APPROVAL_AUDIT, description="Audit log rows (admins).")
    async def audit(query: AuditQueryV1) -> AuditPageV1:
        return await audit_queries.audit_rows(ports.uow, query)

    @bus.serve(endpoints.APPROVAL_LIST, description="Approvals this person may decide.")
    async def list_approvals(query: ListApprovalsV1) -> ApprovalPageV1:
        return await queries.list_approvals(ports, query)

    @bus.serve(endpoints.APPROVAL_REFERRING, description="An approval this person may decide naming a draft or order.")
    async def referring_approval(query: FindReferringApprovalV1) -> ReferringApprovalV1:
        return await queries.referring_approval(ports.uow, query)

    @bus.serve(endpoints.APPROVAL_DELEGATE,
               description="An approver or manager lets another person decide with their roles until a time "
                           "(idempotent by delegation_id).")
    async def delegate(cmd: GiveDelegationV1) -> DelegationV1:
        return await delegations.give_delegation(cmd, ports)

    @bus.serve(endpoints.APPROVAL_REVOKE_DELEGATION, description="The delegator ends a delegation now.")
    async def revoke_delegation(cmd: RevokeDelegationV1) -> DelegationV1:
        return await delegations.revoke_delegation(cmd, ports)

    @bus.serve(endpoints.APPROVAL_DELEGATIONS, description="A person's delegations in force, given and received.")
    async def list_delegations(query: ListDelegationsV1) -> DelegationPageV1:
        return await delegations.list_delegations(ports.uow, query)

    @bus.serve(endpoints.APPROVAL_STAND,
               description="An approver or manager approves in advance one write tool in one session up to an "
                           "amount until a time (idempotent by standing_id).")
    async def stand(cmd: GiveStandingApprovalV1) -> StandingApprovalV1:
        return await standing.give_standing(cmd, ports)

    @bus.serve(endpoints.APPROVAL_REVOKE_STANDING, description="The giver (or an admin) ends a standing approval now.")
    async def revoke_standing(cmd: RevokeStandingApprovalV1) -> StandingApprovalV1:
        return await standing.revoke_standing(cmd, ports)

    @bus.serve(endpoints.APPROVAL_STANDING, description="The standing approvals in force a person gave (admins: all).")
    async def list_standing(query: ListStandingApprovalsV1) -> StandingApprovalPageV1:
        return await standing.list_standing(ports.uow, query)
