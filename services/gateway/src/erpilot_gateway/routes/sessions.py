"""Sessions, messages, tool calls and the live event stream of a session."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from sse_starlette.sse import EventSourceResponse

from erpilot_contracts import requests
from erpilot_contracts.agent.v1 import (
    CancelRunV1,
    CreateSessionV1,
    GetSessionV1,
    ListSessionsV1,
    PostMessageV1,
    SessionPageV1,
    SessionViewV1,
    ToolCallViewV1,
)
from erpilot_contracts.approval.standing import EndRunV1
from erpilot_contracts.approval.v1 import GetApprovalV1
from erpilot_contracts.sessions.v1 import SessionEventV1
from erpilot_contracts.subjects import is_subject_token
from erpilot_gateway import tool_calls
from erpilot_gateway.answers import (
    ApprovalOutcome,
    RunCancelled,
    RunStarted,
    SessionCreated,
    ToolCallAccepted,
    ToolCallFinished,
)
from erpilot_gateway.auth import CurrentUser, User, decode_token, require_roles, token_from
from erpilot_gateway.bodies import REASON_LIMIT, CreateSessionBody, PostMessageBody, ToolCallBody
from erpilot_gateway.problems import Problem
from erpilot_gateway.services import Services
from erpilot_gateway.sse import session_event_stream

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
Requester = require_roles("requester")
# How long the answer to a cancel waits for the approval service to withdraw the run's approvals (it acts on the
# agent's event): long enough for a healthy stack, short enough for an HTTP request.
WITHDRAWAL_WAIT_SECONDS = 5.0


def _services(request: Request):
    return request.app.state.services


@router.post("", status_code=201, dependencies=[Requester])
async def create_session(request: Request, user: CurrentUser, body: CreateSessionBody | None = None
                         ) -> SessionCreated:
    """Start a session owned by the caller."""
    title = body.title if body else None
    services = _services(request)
    session_id = services.new_session_id(user.sub)  # its owner bound by the gateway's MAC, not the agent's word
    cmd = CreateSessionV1(session_id=session_id, owner=user.sub, title=title)  # vouches for nothing: no assertion
    created = await services.call(requests.AGENT_CREATE_SESSION, cmd)
    return SessionCreated(session_id=created.session_id)


@router.get("", dependencies=[Requester])
async def list_sessions(request: Request, user: CurrentUser,
                        q: Annotated[str | None, Query(max_length=200, description="Substring of the title")] = None,
                        cursor: Annotated[str | None, Query(max_length=200)] = None,
                        limit: Annotated[int, Query(ge=1, le=200)] = 50) -> SessionPageV1:
    """Your sessions, newest first: ``{"items": [...], "next_cursor"}``; pass ``next_cursor`` as ``cursor``
    for the next page. ``q`` keeps sessions whose title contains it (case-insensitive)."""
    query = ListSessionsV1(owner=user.sub, q=q or None, cursor=cursor, limit=limit)
    return await _services(request).call(requests.AGENT_SESSIONS, query)


@router.get("/{session_id}")
async def get_session(request: Request, session_id: str, user: CurrentUser) -> SessionViewV1:
    """Messages, tool calls with status, pending approvals and run status of one of your sessions.

    A tool call's result over 16 384 bytes of compact JSON is, here, a marker
    ``{"omitted": true, "reason": "result_too_large", "size_bytes", "limit_bytes", "href"}``; ``href`` is
    the call's ``GET /v1/sessions/{sid}/tool-calls/{call_id}``, which has it in full."""
    query = GetSessionV1(session_id=session_id, owner=user.sub)
    return await _services(request).call(requests.AGENT_SESSION, query)


_IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
IdempotencyKey = Annotated[str | None, Header(description="Same key and body: the same answer; another body: 409.")]


def _checked_key(idempotency_key: str | None) -> str | None:
    if idempotency_key is not None and not _IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        raise Problem(422, "invalid_idempotency_key", "Idempotency-Key must be 1-100 of A-Z a-z 0-9 _ . : -")
    return idempotency_key


@router.post("/{session_id}/messages", status_code=202)
async def post_message(request: Request, session_id: str, body: PostMessageBody, user: CurrentUser,
                       idempotency_key: IdempotencyKey = None) -> RunStarted:
    """Give the agent a message; it runs the model (answers 202 with the run id).

    409 ``run_in_progress`` only while a run of the session is actively working; a run waiting for
    an approval does not block: the new message starts a run beside it. An optional
    ``Idempotency-Key`` header makes a retry return the same run (the same key with another text:
    409 ``idempotency_conflict``); without it every request is a new message.
    """
    message_id = _checked_key(idempotency_key) or f"msg_{uuid.uuid4().hex}"  # fixed before the first publish
    services = _services(request)
    # The gateway fixes the run's id before it signs, so the assertion (which the run keeps for every call it
    # makes) covers that run's calls and no other's; a retry of the message names the same run.
    run_id = services.run_id(session_id, message_id)
    cmd = PostMessageV1(session_id=session_id, owner=user.sub, text=body.text, message_id=message_id, run_id=run_id,
                        assertion=await services.vouch_run(user, session_id, run_id))
    started = await services.call(requests.AGENT_POST_MESSAGE, cmd)
    return RunStarted(run_id=started.run_id)


# Every run id: the gateway's (``RequesterAssertions.run_id``) and the agent's older ones, run_ + 32 hex digits.
RUN_ID = re.compile(r"run_[0-9a-f]{32}")

@router.post("/{session_id}/runs/{run_id}/cancel")
async def cancel_run(request: Request, session_id: str, run_id: str, user: CurrentUser) -> RunCancelled:
    """Cancel one of your runs that waits for a decision: it takes no further step, and its approvals
    still pending end ``withdrawn`` (nothing is committed). Idempotent: repeat it after an error.

    Answers ``{"run_id", "status": "cancelled", "approvals": [{"pending_id", "status"}]}``: each of the
    run's approvals as it ended (``approved`` when a decision came first; that call goes on).
    409 ``run_in_progress`` while the run is working, ``run_not_waiting`` once it is over. Either way, from
    the cancel on no standing approval approves a write of that run: it waits for a person."""
    if not RUN_ID.fullmatch(run_id):  # no run has this id: refused before anything is recorded anywhere
        raise Problem(404, "not_found", f"run {run_id} not found")
    services = _services(request)
    vouched = await services.vouch_run(user, session_id, run_id, cancel=True)
    end_run = EndRunV1(session_id=session_id, run_id=run_id, owner=user.sub, assertion=vouched)
    cancel = CancelRunV1(session_id=session_id, owner=user.sub, run_id=run_id, assertion=vouched)
    if services.issued_run(session_id, run_id):
        # A run this gateway started in this session: the approval service hears of the cancel from here first, not
        # only through the agent, which holds the run's assertion and could keep making calls of the run (security
        # follow-up of #32/#34), whatever the agent answers (a lying 404 too).
        await services.call(requests.APPROVAL_END_RUN, end_run)
        cancelled = await services.call(requests.AGENT_CANCEL_RUN, cancel)
    else:
        # No run of this gateway's in this session: an unknown id (no assertion was ever signed for its calls, so no
        # standing approval can approve one) or an earlier version's run. The agent is asked first, and only a
        # clean 404 records nothing; any other answer ends the run for standing approvals too.
        try:
            cancelled = await services.call(requests.AGENT_CANCEL_RUN, cancel)
        except Problem as refused:
            if (refused.status, refused.code) != (404, "not_found"):
                await services.call(requests.APPROVAL_END_RUN, end_run)
            raise
        await services.call(requests.APPROVAL_END_RUN, end_run)
    # One path withdraws: the approval service acts on the agent's record of the cancel (evt.agent.run_cancelled,
    # with this assertion). The answer reads how each approval ended, as the owner sees it.
    approvals = await approval_outcomes(services, user, cancelled.pending_ids)
    return RunCancelled(run_id=run_id, approvals=approvals)


async def approval_outcomes(services: Services, user: User, pending_ids: list[str]) -> list[ApprovalOutcome]:
    """``{pending_id, status}`` of each approval, read as its owner (``query.approval.get``), waiting up to
    ``WITHDRAWAL_WAIT_SECONDS`` (reading again with a growing pause) until none is still ``pending``."""
    actor = user.actor()
    statuses: dict[str, str] = {}
    waiting = list(dict.fromkeys(pending_ids))
    deadline, pause = time.monotonic() + WITHDRAWAL_WAIT_SECONDS, 0.05
    while True:
        records = await asyncio.gather(*(services.call(requests.APPROVAL_GET,
                                                       GetApprovalV1(pending_id=pending_id, actor=actor))
                                         for pending_id in waiting))
        statuses |= {record.pending_id: record.status for record in records}
        waiting = [record.pending_id for record in records if record.status == "pending"]
        if not waiting or time.monotonic() + pause > deadline:
            return [ApprovalOutcome(pending_id=pending_id, status=statuses[pending_id])
                    for pending_id in dict.fromkeys(pending_ids)]
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)


@router.post("/{session_id}/tool-calls", response_model=None,
             responses={200: {"model": ToolCallFinished}, 202: {"model": ToolCallAccepted}})
async def start_tool_call(request: Request, session_id: str, body: ToolCallBody, user: CurrentUser,
                          idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """Run a tool through the same pipeline the model uses (reads and drafts at once, writes after approval).

    The call's ``call_id`` (unique within the session) is the body's ``call_id``, else the
    ``Idempotency-Key`` header, else a new one: repeating it with the same tool and arguments answers
    with that call (its current state), with others 409 ``idempotency_conflict``. A write may carry ``reason`` (at
    most 500 characters, else 422 ``reason_too_long``): the approver sees it as "the agent says", outside the
    fingerprint.
    """
    if body.reason is not None and len(body.reason) > REASON_LIMIT:
        raise Problem(422, "reason_too_long", f"reason is at most {REASON_LIMIT} characters")
    key = _checked_key(idempotency_key)
    if key is not None and body.call_id is not None and key != body.call_id:
        raise Problem(422, "invalid_idempotency_key", "Idempotency-Key and call_id name different calls")
    call_id = body.call_id or key or f"call_{uuid.uuid4().hex}"  # fixed before the first publish
    view = await tool_calls.start_tool_call(_services(request), session_id=session_id, user=user,
                                            tool=body.tool, arguments=body.arguments, call_id=call_id,
                                            reason=body.reason)
    return tool_call_response(view)


@router.get("/{session_id}/tool-calls/{call_id}", response_model_exclude={"schema_version"})
async def get_tool_call(request: Request, session_id: str, call_id: str, user: CurrentUser) -> ToolCallViewV1:
    """Status, outcome, result or error code of one tool call."""
    view = await tool_calls.get_tool_call(_services(request), session_id=session_id, owner=user.sub, call_id=call_id)
    return view  # without its schema_version (the route's response_model_exclude): the message's, not the API's


class EventStream(EventSourceResponse):
    media_type = "text/event-stream"  # what the document names: the stream itself is sse.py's EventSourceResponse


@router.get("/{session_id}/events", response_class=EventStream, responses={200: {
    "model": SessionEventV1, "description": "text/event-stream: one event per session event (`id`: its seq)"}})
async def session_events(request: Request, session_id: str):
    """Server-sent events of the session; ``Last-Event-ID`` resumes after that seq with no gap. The stream
    ends when the token expires: reconnect with a fresh one (and ``Last-Event-ID``)."""
    user = _user_for_stream(request)
    if not is_subject_token(session_id):  # no session has such an id; nor may it name other sessions' subjects
        raise Problem(404, "not_found", f"session {session_id} not found")
    # The owner check only: the summary has no tool calls, so a long session answers as fast as a new one.
    await _services(request).call(requests.AGENT_SESSION,
                                   GetSessionV1(session_id=session_id, owner=user.sub, summary_only=True))
    last_id = request.headers.get("last-event-id") or request.query_params.get("last_event_id") or "0"
    try:
        after_seq = int(last_id)
    except ValueError:
        raise Problem(422, "invalid_last_event_id", "Last-Event-ID must be an integer seq") from None
    return session_event_stream(request, session_id, user.sub, after_seq, until=user.expires_at)


def _user_for_stream(request: Request) -> User:
    """EventSource in a browser cannot send headers, so the stream also accepts the console cookie."""
    token = token_from(request, allow_cookie=True)
    if not token:
        raise Problem(401, "unauthorized", "missing bearer token")
    return decode_token(token, request.app.state.auth_secret)


def tool_call_response(view: ToolCallViewV1) -> JSONResponse:
    """SPEC §5: finished → 200 with outcome and result; awaiting approval → 202 with the approval; each held to
    the answer's model the route declares."""
    status, body = tool_calls.tool_call_answer(view)
    answer = (ToolCallFinished if status == 200 else ToolCallAccepted).model_validate(body)
    return JSONResponse(answer.model_dump(mode="json", exclude_unset=True), status_code=status)
