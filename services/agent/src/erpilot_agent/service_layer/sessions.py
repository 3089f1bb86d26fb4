"""Sessions: creation and the owner's view of one."""

from __future__ import annotations

from typing import Any

from erpilot_agent.adapters import calls
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.view_bounds import bounded_result
from erpilot_agent.service_layer.call_ports import UnitOfWorkFactory
from erpilot_contracts.agent.v1 import GetSessionV1, ListSessionsV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform import cursors


async def create_session(uow: UnitOfWorkFactory, session_id: str, owner: str, title: str | None) -> ReplyV1:
    """Idempotent by ``session_id``: a redelivery finds the session it created."""
    async with uow() as work:
        existing = await work.sessions.get(session_id)
        if existing is None:
            await work.sessions.add(session_id, owner, title)
            await work.commit()
        elif existing.owner != owner:
            return ReplyV1.failure("idempotency_conflict", f"session {session_id} exists", 409)
    return ReplyV1.success({"session_id": session_id})


async def session_view(uow: UnitOfWorkFactory, query: GetSessionV1) -> ReplyV1:
    """Messages, tool calls with status, pending approvals and run status (SPEC §5).

    A tool result over ``view_bounds.VIEW_RESULT_BYTES`` is the omitted marker here (the call's own
    view has it in full). ``summary_only``: the session and its run status, nothing per call or message.
    """
    session_id = query.session_id
    async with uow(read_only=True) as work:
        session = await work.sessions.get(session_id)
        if session is None or session.owner != query.owner:
            return ReplyV1.failure("not_found", f"session {session_id} not found", 404)
        runs = await work.sessions.runs(session_id)
        if not query.summary_only:
            records = await work.calls.in_session(session_id)
            events = await work.sessions.events(session_id)
    run_views: list[dict[str, Any]] = [
        {"run_id": r.run_id, "status": r.status, "error": r.error, "created_at": r.created_at.isoformat()}
        for r in runs
    ]
    summary = {
        "session_id": session_id, "owner": session.owner, "title": session.title,
        "created_at": session.created_at.isoformat(), "last_seq": session.last_seq,
        "run_status": run_views[-1]["status"] if run_views else "idle", "active_run_id": session.active_run_id,
    }
    if query.summary_only:
        return ReplyV1.success(summary)
    tool_calls = [_bounded(calls.view(record, record.call)) for record in records]
    messages = [{"seq": e.seq, **e.data} for e in events if e.type == "message"]
    pending = [
        {k: c[k] for k in ("call_id", "pending_id", "fingerprint", "expires_at", "approval_url", "preview")}
        for c in tool_calls if c["status"] == "awaiting_approval"
    ]
    return ReplyV1.success({**summary, "runs": run_views, "messages": messages, "tool_calls": tool_calls,
                            "pending_approvals": pending})


def _bounded(view: dict[str, Any]) -> dict[str, Any]:
    return {**view, "result": bounded_result(view["result"], session_id=view["session_id"], call_id=view["call_id"])}


async def tool_call_view(uow: UnitOfWorkFactory, session_id: str, owner: str, call_id: str) -> ReplyV1:
    """The call ``call_id`` of this session (the same id in another session is another call)."""
    async with uow(read_only=True) as work:
        session = await work.sessions.get(session_id)
        record = await work.calls.get(call_key(session_id, call_id))
    if session is None or session.owner != owner or record is None:
        return ReplyV1.failure("not_found", f"tool call {call_id} not found", 404)
    return ReplyV1.success(calls.view(record, record.call))


async def list_sessions(uow: UnitOfWorkFactory, query: ListSessionsV1) -> ReplyV1:
    """The owner's sessions, newest first, ``limit`` a page; ``next_cursor`` when there may be more."""
    try:
        before = cursors.decode(query.cursor) if query.cursor else None
    except cursors.BadCursor as exc:
        return ReplyV1.failure(exc.code, str(exc), 422)
    async with uow(read_only=True) as work:
        rows = await work.sessions.owned_by(query.owner, q=query.q, before=before, limit=query.limit + 1)
    page = rows[:query.limit]
    items = [{"session_id": r.session_id, "title": r.title, "created_at": r.created_at.isoformat(),
              "last_seq": r.last_seq, "active_run_id": r.active_run_id} for r in page]
    more = len(rows) > query.limit
    return ReplyV1.success({"items": items,
                            "next_cursor": cursors.encode(page[-1].created_at, page[-1].session_id) if more else None})
