"""Sessions: creation and the owner's views of them (typed replies; a refusal is raised as ``Refused``)."""

from __future__ import annotations

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.view_bounds import fitting, result_size
from erpilot_agent.service_layer import views
from erpilot_agent.service_layer.ports import AgentUnitOfWork, Work
from erpilot_contracts.agent.v1 import (
    CreateSessionV1,
    GetSessionV1,
    GetToolCallV1,
    ListSessionsV1,
    SessionPageV1,
    SessionRefV1,
    SessionViewV1,
    ToolCallViewV1,
)
from erpilot_contracts.sessions.v1 import GetSessionEventsV1, SessionEventPageV1, SessionEventV1
from erpilot_platform import cursors
from erpilot_platform.refusals import Refused

# The events of one page together, as compact JSON: a reply must fit NATS' max_payload (1 MiB by default), and a
# long draft's events carry its whole revision each (tests/e2e/test_large_draft.py).
EVENT_PAGE_BYTES = 256 * 1024


async def create_session(uow: AgentUnitOfWork, cmd: CreateSessionV1) -> SessionRefV1:
    """Idempotent by ``session_id``: a redelivery finds the session it created, also when it runs at the same time
    as the first delivery (both find no session; ``add`` leaves the one stored first)."""
    async def work(unit: Work) -> None:
        existing = await unit.sessions.get(cmd.session_id)
        if existing is None:
            await unit.sessions.add(cmd.session_id, cmd.owner, cmd.title)
            existing = await unit.sessions.get(cmd.session_id)
        if existing is None or existing.owner != cmd.owner:
            raise Refused("idempotency_conflict", f"session {cmd.session_id} exists", 409)

    await uow.run(work)
    return SessionRefV1(session_id=cmd.session_id)


async def session_view(uow: AgentUnitOfWork, query: GetSessionV1) -> SessionViewV1:
    """Messages, tool calls with status, pending approvals and run status (SPEC §5). ``summary_only``: the
    session and its run status, nothing per call or message."""
    async def look(unit: Work) -> SessionViewV1:
        session = await unit.sessions.get(query.session_id)
        if session is None or session.owner != query.owner:
            raise Refused("not_found", f"session {query.session_id} not found", 404)
        runs = await unit.runs.of_session(query.session_id)
        if query.summary_only:
            return views.session_view(session, runs, None, None)
        return views.session_view(session, runs, await unit.calls.in_session(query.session_id),
                                  await unit.sessions.events(query.session_id))

    return await uow.read(look)


async def session_events(uow: AgentUnitOfWork, query: GetSessionEventsV1) -> SessionEventPageV1:
    """The owner's stored events after ``after_seq``, a page of ``limit``: the store every reader of the stream
    replays from (live delivery is core NATS and may drop one)."""
    async def look(unit: Work) -> SessionEventPageV1:
        session = await unit.sessions.get(query.session_id)
        if session is None or session.owner != query.owner:
            raise Refused("not_found", f"session {query.session_id} not found", 404)
        stored = await unit.sessions.events(query.session_id, after_seq=query.after_seq, limit=query.limit + 1)
        page = stored[:fitting([result_size(e.data) for e in stored[:query.limit]], EVENT_PAGE_BYTES)]
        return SessionEventPageV1(more=len(page) < len(stored), events=[
            SessionEventV1(seq=e.seq, type=e.type, session_id=query.session_id, occurred_at=e.occurred_at,
                           data=e.data) for e in page])

    return await uow.read(look)


async def tool_call_view(uow: AgentUnitOfWork, query: GetToolCallV1) -> ToolCallViewV1:
    """The call ``call_id`` of this session (the same id in another session is another call)."""
    async def look(unit: Work) -> ToolCallViewV1:
        session = await unit.sessions.get(query.session_id)
        record = await unit.calls.get(call_key(query.session_id, query.call_id))
        if session is None or session.owner != query.owner or record is None:
            raise Refused("not_found", f"tool call {query.call_id} not found", 404)
        return views.call_view(record)

    return await uow.read(look)


async def list_sessions(uow: AgentUnitOfWork, query: ListSessionsV1) -> SessionPageV1:
    """The owner's sessions, newest first, ``limit`` a page; ``next_cursor`` when there may be more."""
    try:
        before = cursors.decode(query.cursor) if query.cursor else None
    except cursors.BadCursor as exc:
        raise Refused(exc.code, str(exc), 422) from None

    async def look(unit: Work) -> SessionPageV1:
        rows = await unit.sessions.owned_by(query.owner, q=query.q, before=before, limit=query.limit + 1)
        page = rows[:query.limit]
        more = len(rows) > query.limit
        return SessionPageV1(items=[views.session_summary(row) for row in page],
                             next_cursor=cursors.encode(page[-1].created_at, page[-1].session_id) if more else None)

    return await uow.read(look)
