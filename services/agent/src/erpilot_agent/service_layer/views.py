"""What the agent answers about its records: the contract views of a call and of a session (typed replies)."""

from __future__ import annotations

from erpilot_agent.domain.run_state import Run
from erpilot_agent.domain.view_bounds import bounded_result
from erpilot_agent.service_layer.ports import CallRecord, SessionRecord, StoredEvent
from erpilot_contracts.agent.v1 import (
    PendingApprovalViewV1,
    RunViewV1,
    SessionMessageV1,
    SessionSummaryV1,
    SessionViewV1,
    ToolCallViewV1,
)


def call_view(record: CallRecord) -> ToolCallViewV1:
    """The call as its owner sees it."""
    call, pending = record.call, record.call.pending
    return ToolCallViewV1(
        call_id=call.call_id, session_id=record.session_id, tool=call.tool, arguments=call.arguments,
        status=call.view_status, outcome=call.outcome, result=call.result, error=call.error,
        operation_id=record.operation_id,
        pending_id=pending.pending_id if pending else None,
        fingerprint=pending.fingerprint if pending else None,
        expires_at=pending.expires_at if pending else None,
        approval_url=pending.approval_url if pending else None,
        preview=pending.preview if pending else None,
        approval_status=call.resolutions.get(pending.pending_id, "pending") if pending else None,
        created_at=record.created_at, updated_at=record.updated_at)


def bounded_call_view(record: CallRecord) -> ToolCallViewV1:
    """The call as the session view shows it: a result over ``view_bounds.VIEW_RESULT_BYTES`` is the omitted
    marker (the call's own view has it in full)."""
    view = call_view(record)
    return view.model_copy(update={"result": bounded_result(view.result, session_id=record.session_id,
                                                            call_id=view.call_id)})


def session_summary(session: SessionRecord) -> SessionSummaryV1:
    return SessionSummaryV1(session_id=session.session_id, title=session.title, created_at=session.created_at,
                            last_seq=session.last_seq, active_run_id=session.active_run_id)


def session_view(session: SessionRecord, runs: list[Run], calls: list[CallRecord] | None,
                 events: list[StoredEvent] | None) -> SessionViewV1:
    """Messages, tool calls with status, pending approvals and run status (SPEC §5); without ``calls`` and
    ``events`` (a summary) only the session and its runs' status."""
    run_views = [RunViewV1(run_id=run.run_id, status=run.status, error=run.error, created_at=run.created_at)
                 for run in runs]
    view = SessionViewV1(session_id=session.session_id, owner=session.owner, title=session.title,
                         created_at=session.created_at, last_seq=session.last_seq,
                         run_status=runs[-1].status if runs else "idle", active_run_id=session.active_run_id)
    if calls is None or events is None:
        return view
    tool_calls = [bounded_call_view(record) for record in calls]
    pending = [PendingApprovalViewV1(call_id=c.call_id, pending_id=c.pending_id, fingerprint=c.fingerprint,
                                     expires_at=c.expires_at, approval_url=c.approval_url, preview=c.preview)
               for c in tool_calls if c.status == "awaiting_approval"]
    messages = [SessionMessageV1(seq=e.seq, **e.data) for e in events if e.type == "message"]
    return view.model_copy(update={"runs": run_views, "messages": messages, "tool_calls": tool_calls,
                                   "pending_approvals": pending})
