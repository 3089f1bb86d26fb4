"""NATS endpoints of the agent: commands from the gateway, the approval service's and the ERP's events, queries.

Each handler is ``async def handle(msg, deps: AgentDeps) -> reply``: it returns its typed reply (the ServiceBus
answers ``ReplyV1.success``) or raises ``Refused``; an event handler returns nothing, and raising
``TransientError`` has its event redelivered later. The first paragraph of a handler's docstring describes its
endpoint (AsyncAPI)."""

from __future__ import annotations

from dataclasses import dataclass

from erpilot_agent.service_layer import escalations, expiry_warnings, sessions, votes
from erpilot_agent.service_layer.ports import AgentUnitOfWork
from erpilot_agent.service_layer.runs import RunService
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_contracts import events, requests
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
from erpilot_platform.batches import batched
from erpilot_platform.endpoints import ServiceBus


@dataclass(frozen=True)
class AgentDeps:
    """What the agent's handlers work with: its unit of work, its tool calls and its runs of the model."""

    unit: AgentUnitOfWork
    tool_calls: ToolCallService
    runs: RunService


async def create_session(cmd: CreateSessionV1, deps: AgentDeps) -> SessionRefV1:
    """Create a session for its owner."""
    return await sessions.create_session(deps.unit, cmd)


async def start_tool_call(cmd: StartToolCallV1, deps: AgentDeps) -> ToolCallViewV1:
    """Run a tool call (idempotent by session and call_id)."""
    return await deps.tool_calls.start(session_id=cmd.session_id, owner=cmd.owner, tool=cmd.tool,
                                       raw_arguments=cmd.arguments, call_id=cmd.call_id, assertion=cmd.assertion,
                                       reason=cmd.reason)


async def post_message(cmd: PostMessageV1, deps: AgentDeps) -> RunRefV1:
    """A user message: starts a run of the model (idempotent by message_id)."""
    return await deps.runs.post_message(cmd)


async def cancel_run(cmd: CancelRunV1, deps: AgentDeps) -> CancelledRunV1:
    """The owner cancels a waiting run; answers the pending ids evt.agent.run_cancelled withdraws."""
    return await deps.runs.cancel(cmd)


async def approval_requested(evt: ApprovalRequestedV1, deps: AgentDeps) -> None:
    """A pending approval exists."""
    await deps.tool_calls.on_approval_requested(evt.record)


async def approval_request_refused(evt: ApprovalRequestRefusedV1, deps: AgentDeps) -> None:
    """The approval service refused the ERP's approval request: the call fails."""
    await deps.tool_calls.on_request_refused(evt)


async def approval_resolved(evt: ApprovalResolvedV1, deps: AgentDeps) -> None:
    """An approval was decided or expired."""
    await votes.before_resolution(deps.unit, evt)  # every vote shows before the resolution (idempotent)
    await deps.tool_calls.on_approval_resolved(evt)


async def operation_finished(evt: OperationStatusV1, deps: AgentDeps) -> None:
    """The ERP committed or rejected an approved operation: the call's outcome."""
    await deps.tool_calls.on_operation_finished(evt)


async def approval_expiring(evt: ApprovalExpiringV1, deps: AgentDeps) -> None:
    """A pending approval nears its deadline: approval_expiring on the session stream."""
    await expiry_warnings.on_approval_expiring(deps.unit, evt)


async def approval_escalated(evt: ApprovalEscalatedV1, deps: AgentDeps) -> None:
    """A pending approval escalated (more roles may decide it): approval_escalated on the session stream."""
    await escalations.on_approval_escalated(deps.unit, evt)


async def approval_voted(evt: ApprovalVotedV1, deps: AgentDeps) -> None:
    """A person voted on a quorum approval: approval_vote on the session stream."""
    await votes.on_approval_voted(deps.unit, evt)


async def get_session(query: GetSessionV1, deps: AgentDeps) -> SessionViewV1:
    """The owner's view of a session."""
    return await sessions.session_view(deps.unit, query)


async def list_sessions(query: ListSessionsV1, deps: AgentDeps) -> SessionPageV1:
    """The owner's sessions, newest first."""
    return await sessions.list_sessions(deps.unit, query)


async def get_session_events(query: GetSessionEventsV1, deps: AgentDeps) -> SessionEventPageV1:
    """The owner's stored events of a session after a seq (SSE replay)."""
    return await sessions.session_events(deps.unit, query)


async def get_tool_call(query: GetToolCallV1, deps: AgentDeps) -> ToolCallViewV1:
    """One tool call of a session."""
    return await sessions.tool_call_view(deps.unit, query)


HANDLERS = {
    requests.AGENT_CREATE_SESSION: create_session,
    requests.AGENT_TOOL_CALL: start_tool_call,
    requests.AGENT_POST_MESSAGE: post_message,
    requests.AGENT_CANCEL_RUN: cancel_run,
    # one unit of work each (the call's transition), no network wait before it: the events in flight together
    # share one transaction (erpilot_platform.batches). Not approval_resolved: its votes commit apart, first.
    events.APPROVAL_REQUESTED: batched(approval_requested),
    events.APPROVAL_REQUEST_REFUSED: approval_request_refused,
    events.APPROVAL_RESOLVED: approval_resolved,
    events.ERP_OPERATION_FINISHED: batched(operation_finished),
    events.APPROVAL_EXPIRING: approval_expiring,
    events.APPROVAL_ESCALATED: approval_escalated,
    events.APPROVAL_VOTED: approval_voted,
    requests.AGENT_SESSION: get_session,
    requests.AGENT_SESSIONS: list_sessions,
    requests.AGENT_EVENTS: get_session_events,
    requests.AGENT_TOOL_CALL_VIEW: get_tool_call,
}


def register(bus: ServiceBus, deps: AgentDeps) -> None:
    bus.register(HANDLERS, deps)
