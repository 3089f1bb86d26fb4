"""Agent commands and queries (schema_version 1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from erpilot_contracts.base import ErrorV1, Message
from erpilot_contracts.erp.preview import PreviewV1
from erpilot_contracts.json_input import CanonicalJson

ASSERTION_FIELD = Field(
    None, description="The gateway's requester assertion (erpilot_platform.assertions): a signed statement of the "
                      "person (sub, roles) acting in this session. The agent stores it and forwards it unchanged; "
                      "the ERP and the approval service accept a requester only with it.")


class ReplyPart(BaseModel):
    """An item inside a reply (a session in a list, a run or a message of a session's view): no message of its own,
    so no ``schema_version`` (its reply's is the version); unknown fields are ignored as in a ``Message``."""

    model_config = ConfigDict(extra="ignore", frozen=True)


ToolCallStatus = Literal["received", "running", "awaiting_approval", "executing", "finished"]
ToolOutcome = Literal["succeeded", "business_rejected", "not_executed", "failed"]


class CreateSessionV1(Message):
    """Create a session. The caller picks ``session_id`` so a redelivered command creates nothing new."""

    session_id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,100}$",
                            description="One token of the session's events subject: letters, digits, `_`, `-`.")
    owner: str
    title: str | None = None
    assertion: str | None = ASSERTION_FIELD


class StartToolCallV1(Message):
    """A tool call from an external agent. Idempotent by (``session_id``, ``call_id``) with the same tool
    and arguments; the same ``call_id`` with others is a conflict. The ``call_id`` is fixed before the
    first publish (the client's, its ``Idempotency-Key``, or one the gateway assigns), so a redelivered
    or duplicated command finds the same call; it is unique per session, not globally."""

    session_id: str
    owner: str = Field(description="The `sub` of the caller; must own the session.")
    tool: str
    arguments: CanonicalJson = Field(description="Raw arguments; validated by the agent against the tool schema.")
    call_id: str = Field(min_length=1, max_length=100, description="Unique within the session.")
    assertion: str | None = ASSERTION_FIELD
    reason: str | None = Field(None, max_length=500, description=(
        "Writes: why the agent asks, in its words. Shown to the approver as \"the agent says\"; never part of the "
        "arguments or the fingerprint, and trusted for nothing else."))


class ToolCallViewV1(Message):
    """One tool call as its owner sees it (the answer to ``req.agent.tool_call`` and ``query.agent.tool_call``).
    ``status`` ``running`` also covers a write being prepared, ``executing`` one whose approval was granted."""

    call_id: str
    session_id: str
    tool: str
    arguments: Any
    status: ToolCallStatus
    outcome: ToolOutcome | None = None
    result: dict[str, Any] | None = None
    error: ErrorV1 | None = None
    operation_id: str | None = None
    pending_id: str | None = None
    fingerprint: str | None = None
    expires_at: datetime | None = None
    approval_url: str | None = None
    preview: PreviewV1 | None = None
    approval_status: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class PostMessageV1(Message):
    """A user message that starts a run. Idempotent by ``message_id`` within the session: a redelivery
    (or a client retry with the same id) answers with the run it started; another text is a conflict."""

    session_id: str
    owner: str
    text: str
    message_id: str = Field(min_length=1, max_length=100,
                            description="The client's Idempotency-Key or the gateway's id, fixed before publishing.")
    run_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,100}$",
                               description="The run the message starts, fixed by the gateway (the same for the same "
                                           "message), which the assertion is bound to; the agent uses it.")
    assertion: str | None = Field(None, description="The gateway's requester assertion for this run (`purpose: run`, "
                                                    "`run_id`); the run keeps it for every call it makes "
                                                    "(ARCHITECTURE, requester assertions).")


class RunRefV1(Message):
    """The answer to ``cmd.agent.post_message``: the run the message started (a repeat: the run it started)."""

    run_id: str


class GetSessionV1(Message):
    """The owner's view of a session. ``summary_only`` asks for the session itself and its run status,
    without messages, tool calls or approvals: what a caller needs to check the session is the owner's
    (an agent that predates the field ignores it and answers with the whole view)."""

    session_id: str
    owner: str
    summary_only: bool = Field(False, description="Only the session and its run status; no messages or tool calls.")


class GetToolCallV1(Message):
    session_id: str
    owner: str
    call_id: str


class ListSessionsV1(Message):
    """The owner's sessions, newest first; ``q`` matches a case-insensitive substring of the title."""

    owner: str
    q: str | None = Field(None, max_length=200)
    cursor: str | None = Field(None, max_length=200, description="The `next_cursor` of the previous page.")
    limit: int = Field(50, ge=1, le=200)


class SessionRefV1(Message):
    """The answer to ``cmd.agent.create_session``: the session (a repeat: the one it created)."""

    session_id: str


class SessionSummaryV1(ReplyPart):
    """One session in the owner's list."""

    session_id: str
    title: str | None = None
    created_at: datetime
    last_seq: int = Field(description="The seq of the session's last event (0: none yet).")
    active_run_id: str | None = None


class SessionPageV1(Message):
    """The answer to ``query.agent.sessions``: a page of the owner's sessions, newest first."""

    items: list[SessionSummaryV1]
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; None: no more.")


class RunViewV1(ReplyPart):
    run_id: str
    status: str = Field(description="running | waiting | finished | failed | cancelled")
    error: dict[str, Any] | None = Field(None, description="Why the run failed: {code, message}.")
    created_at: datetime


class SessionMessageV1(ReplyPart):
    """A user or assistant message of the session, with the seq of its `message` event."""

    seq: int
    role: str
    text: str | None = None
    run_id: str | None = None


class PendingApprovalViewV1(ReplyPart):
    """A call of the session waiting for a person's decision."""

    call_id: str
    pending_id: str | None = None
    fingerprint: str | None = None
    expires_at: datetime | None = None
    approval_url: str | None = None
    preview: PreviewV1 | None = None


class SessionViewV1(Message):
    """The answer to ``query.agent.session`` (SPEC §5): the session, its runs, messages, tool calls and pending
    approvals. With ``summary_only`` the lists are None (not asked for)."""

    session_id: str
    owner: str
    title: str | None = None
    created_at: datetime
    last_seq: int
    run_status: str = Field(description="The status of the session's latest run; `idle` before the first.")
    active_run_id: str | None = None
    runs: list[RunViewV1] | None = None
    messages: list[SessionMessageV1] | None = None
    tool_calls: list[ToolCallViewV1] | None = Field(None, description="A result over the view's bound is the "
                                                                      "omitted marker (the call's own view has it).")
    pending_approvals: list[PendingApprovalViewV1] | None = None


class CancelRunV1(Message):
    """The owner cancels a run that waits for a decision: it takes no further step. Idempotent by run."""

    session_id: str
    owner: str
    run_id: str
    assertion: str | None = ASSERTION_FIELD


class CancelledRunV1(Message):
    """The answer to ``cmd.agent.cancel_run``: the run is cancelled (now or by an earlier cancel)."""

    run_id: str
    status: Literal["cancelled"] = "cancelled"
    pending_ids: list[str] = Field(description="The pending approvals of the run's calls that still awaited a "
                                               "decision; the approval service withdraws them from "
                                               "`evt.agent.run_cancelled`, the gateway shows their status.")


class RunCancelledV1(Message):
    """A waiting run was cancelled by its owner (from the agent's outbox, in the cancel's transaction).

    The approval service withdraws, from its own records, the approvals still pending for these calls
    of this session that ``owner`` requested; it never takes pending ids from this event. Published once
    per run (from one outbox row); handling it twice changes nothing."""

    session_id: str
    run_id: str
    owner: str = Field(description="The session's owner, who cancelled the run.")
    call_ids: list[str] = Field(description="The run's calls that awaited a decision (call_id, unique per session).")
    cancelled_at: datetime
    assertion: str | None = Field(None, description="The cancel command's requester assertion, forwarded unchanged: "
                                                    "the approval service withdraws only for the person it names.")
