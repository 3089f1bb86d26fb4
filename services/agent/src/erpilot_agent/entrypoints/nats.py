"""NATS endpoints of the agent: commands from the gateway, the approval service's and the ERP's events, queries.

Each handler returns its typed reply (the ServiceBus answers ``ReplyV1.success``) or raises ``Refused``; an
event handler returns nothing, and raising ``TransientError`` has its event redelivered later."""

from __future__ import annotations

from erpilot_agent.service_layer import escalations, expiry_warnings, sessions, votes
from erpilot_agent.service_layer.ports import AgentUnitOfWork
from erpilot_agent.service_layer.runs import RunService
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_contracts import requests, subjects
from erpilot_contracts.agent.v1 import (
    CancelledRunV1,
    CancelRunV1,
    CreateSessionV1,
    GetSessionV1,
    GetToolCallV1,
    ListSessionsV1,
    PostMessageV1,
    RunRefV1,
    SessionPageV1,
    SessionRefV1,
    SessionViewV1,
    StartToolCallV1,
    ToolCallViewV1,
)
from erpilot_contracts.approval.v1 import (
    ApprovalEscalatedV1,
    ApprovalExpiringV1,
    ApprovalRequestedV1,
    ApprovalRequestRefusedV1,
    ApprovalResolvedV1,
    ApprovalVotedV1,
)
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_contracts.sessions.v1 import GetSessionEventsV1, SessionEventPageV1
from erpilot_platform.endpoints import ServiceBus


def register(bus: ServiceBus, uow: AgentUnitOfWork, tool_calls: ToolCallService, runs: RunService) -> None:
    @bus.serve(requests.AGENT_CREATE_SESSION, description="Create a session for its owner.")
    async def create_session(cmd: CreateSessionV1) -> SessionRefV1:
        return await sessions.create_session(uow, cmd)

    @bus.serve(requests.AGENT_TOOL_CALL, description="Run a tool call (idempotent by session and call_id).")
    async def start_tool_call(cmd: StartToolCallV1) -> ToolCallViewV1:
        return await tool_calls.start(session_id=cmd.session_id, owner=cmd.owner, tool=cmd.tool,
                                      raw_arguments=cmd.arguments, call_id=cmd.call_id, assertion=cmd.assertion,
                                      reason=cmd.reason)

    @bus.serve(requests.AGENT_POST_MESSAGE,
               description="A user message: starts a run of the model (idempotent by message_id).")
    async def post_message(cmd: PostMessageV1) -> RunRefV1:
        return await runs.post_message(cmd)

    @bus.serve(requests.AGENT_CANCEL_RUN,
               description="The owner cancels a waiting run; answers the pending ids evt.agent.run_cancelled "
                           "withdraws.")
    async def cancel_run(cmd: CancelRunV1) -> CancelledRunV1:
        return await runs.cancel(cmd)

    @bus.event(subjects.APPROVAL_EVT_REQUESTED, ApprovalRequestedV1, description="A pending approval exists.")
    async def approval_requested(evt: ApprovalRequestedV1) -> None:
        await tool_calls.on_approval_requested(evt.record)

    @bus.event(subjects.APPROVAL_EVT_REQUEST_REFUSED, ApprovalRequestRefusedV1,
               description="The approval service refused the ERP's approval request: the call fails.")
    async def approval_request_refused(evt: ApprovalRequestRefusedV1) -> None:
        await tool_calls.on_request_refused(evt)

    @bus.event(subjects.APPROVAL_EVT_RESOLVED, ApprovalResolvedV1, description="An approval was decided or expired.")
    async def approval_resolved(evt: ApprovalResolvedV1) -> None:
        await votes.before_resolution(uow, evt)  # every vote shows before the resolution (idempotent)
        await tool_calls.on_approval_resolved(evt)

    @bus.event(subjects.ERP_EVT_OPERATION_FINISHED, OperationStatusV1,
               description="The ERP committed or rejected an approved operation: the call's outcome.")
    async def operation_finished(evt: OperationStatusV1) -> None:
        await tool_calls.on_operation_finished(evt)

    @bus.event(subjects.APPROVAL_EVT_EXPIRING, ApprovalExpiringV1,
               description="A pending approval nears its deadline: approval_expiring on the session stream.")
    async def approval_expiring(evt: ApprovalExpiringV1) -> None:
        await expiry_warnings.on_approval_expiring(uow, evt)

    @bus.event(subjects.APPROVAL_EVT_ESCALATED, ApprovalEscalatedV1,
               description="A pending approval escalated (more roles may decide it): approval_escalated on the "
                           "session stream.")
    async def approval_escalated(evt: ApprovalEscalatedV1) -> None:
        await escalations.on_approval_escalated(uow, evt)

    @bus.event(subjects.APPROVAL_EVT_VOTED, ApprovalVotedV1,
               description="A person voted on a quorum approval: approval_vote on the session stream.")
    async def approval_voted(evt: ApprovalVotedV1) -> None:
        await votes.on_approval_voted(uow, evt)

    @bus.serve(requests.AGENT_SESSION, description="The owner's view of a session.")
    async def get_session(query: GetSessionV1) -> SessionViewV1:
        return await sessions.session_view(uow, query)

    @bus.serve(requests.AGENT_SESSIONS, description="The owner's sessions, newest first.")
    async def list_sessions(query: ListSessionsV1) -> SessionPageV1:
        return await sessions.list_sessions(uow, query)

    @bus.serve(requests.AGENT_EVENTS, description="The owner's stored events of a session after a seq (SSE replay).")
    async def get_session_events(query: GetSessionEventsV1) -> SessionEventPageV1:
        return await sessions.session_events(uow, query)

    @bus.serve(requests.AGENT_TOOL_CALL_VIEW, description="One tool call of a session.")
    async def get_tool_call(query: GetToolCallV1) -> ToolCallViewV1:
        return await sessions.tool_call_view(uow, query)
