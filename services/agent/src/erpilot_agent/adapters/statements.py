"""The SQL statements on sessions, session events and tool calls (agent schema) that the repositories of
``sql_calls`` build on; those of every tool call's cycle run straight on asyncpg (``sql``). Session events are
written with their outbox rows (the ``Outbox`` given: the service's own, never a module global), in one statement
where the caller already holds the session's lock."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_agent.adapters import sql
from erpilot_agent.adapters.tables import session_events, sessions, tool_calls
from erpilot_contracts.sessions.v1 import SessionEventV1
from erpilot_contracts.subjects import session_events_subject
from erpilot_platform import raw_sql
from erpilot_platform.db import driver_connection, fields
from erpilot_platform.outbox import Outbox
from erpilot_platform.outbox_rows import insert_args


def now() -> datetime:
    return datetime.now(UTC)


async def create_session(conn: AsyncConnection, session_id: str, owner: str, title: str | None) -> None:
    # A concurrent copy of the command may insert first: this one then waits for it and inserts nothing.
    await conn.execute(insert(sessions).values(session_id=session_id, owner=owner, title=title)
                       .on_conflict_do_nothing(index_elements=[sessions.c.session_id]))


async def get_session(conn: AsyncConnection, session_id: str, *, lock: bool = False) -> Any:
    raw = await driver_connection(conn)
    return fields(await raw.fetchrow(sql.LOCK_SESSION if lock else sql.GET_SESSION, session_id))


async def append_events(conn: AsyncConnection, outbox: Outbox, session_id: str,
                        events: list[tuple[str, dict[str, Any]]], *, last_seq: int | None = None) -> list[int]:
    """Append the events with the next gap-free ``seq`` numbers and queue them for publication; their seqs.

    The session row lock orders concurrent writers of one session: they get consecutive numbers in
    commit order, and the outbox relays them in that order. ``last_seq``: the session's as read under
    that lock in this transaction (``get_tool_call(lock=True)``); then the numbers, the events and their
    outbox rows are one statement. Without it an ``UPDATE … RETURNING`` takes the lock and the numbers
    first (two statements), however many events there are.
    """
    if not events:
        return []
    raw = await driver_connection(conn)
    numbered = last_seq is None
    if numbered:
        last_seq = await raw.fetchval(sql.BUMP_LAST_SEQ, session_id, len(events)) - len(events)
    args, seqs = _event_args(outbox, session_id, events, last_seq, set_last_seq=not numbered)
    await raw.execute(sql.append_events(set_last_seq=not numbered), *args)
    return seqs


def _event_args(outbox: Outbox, session_id: str, events: list[tuple[str, dict[str, Any]]], last_seq: int,
                *, set_last_seq: bool) -> tuple[list[Any], list[int]]:
    """The parameters of ``sql._event_ctes`` that append ``events`` after ``last_seq`` (the session's, under its
    row lock): the events, their outbox rows (counted as this unit of work's) and, with ``set_last_seq``, the new
    ``last_seq``; and the events' seqs. PostgreSQL runs the CTEs on one snapshot; they touch other rows than the
    statement they are attached to, so none needs to see another."""
    occurred_at = now()
    stored = [SessionEventV1(seq=seq, type=type_, session_id=session_id, occurred_at=occurred_at, data=data)
              for seq, (type_, data) in enumerate(events, start=last_seq + 1)]
    rows = outbox.rows([(session_events_subject(session_id), e, f"session:{session_id}:{e.seq}") for e in stored])
    args = [session_id, occurred_at, [e.seq for e in stored], [e.type for e in stored],
            [json.dumps(e.data) for e in stored], *insert_args(rows)]
    if set_last_seq:
        args.append(last_seq + len(events))
    return args, [e.seq for e in stored]


async def list_events(conn: AsyncConnection, session_id: str, after_seq: int = 0, limit: int | None = None
                      ) -> list[Any]:
    return (await conn.execute(
        select(session_events).where(session_events.c.session_id == session_id, session_events.c.seq > after_seq)
        .order_by(session_events.c.seq).limit(limit)
    )).all()


async def get_tool_call(conn: AsyncConnection, call_key: str, *, lock: bool = False) -> Any:
    """The call with this ``call_key`` (domain.call_identity: session id and call id together).

    ``lock``: with its session's ``last_seq``, both rows locked until the transaction ends (the call
    against other transitions, the session for the events the transition appends: ``append_events``)."""
    raw = await driver_connection(conn)
    return fields(await raw.fetchrow(sql.LOCK_TOOL_CALL if lock else sql.GET_TOOL_CALL, call_key))


async def insert_tool_call(conn: AsyncConnection, **values: Any) -> Any:
    """Insert a new call and return its row with its session's ``last_seq``, the session row locked (as
    ``get_tool_call(lock=True)``); None if a concurrent delivery of the same command inserted it first."""
    columns = tuple(sorted(values))  # one statement text per set of columns
    raw = await driver_connection(conn)
    return fields(await raw.fetchrow(sql.insert_tool_call(columns),
                                     *raw_sql.values(tool_calls, columns, values)))


async def update_tool_call(conn: AsyncConnection, call_key: str, *, outbox: Outbox | None = None,
                           events: list[tuple[str, dict[str, Any]]] = (), session: tuple[str, int] | None = None,
                           **values: Any) -> Any:
    """Change the call and return its row as changed (None if there is no such call); with ``events``
    appended to ``session`` (its id and ``last_seq`` under its row lock) in the same statement."""
    values = {**values, "updated_at": now()}
    columns = tuple(sorted(values))  # one statement text per set of columns
    args = [call_key, *raw_sql.values(tool_calls, columns, values)]
    if events:
        session_id, last_seq = session
        args += _event_args(outbox, session_id, list(events), last_seq, set_last_seq=True)[0]
    raw = await driver_connection(conn)
    return fields(await raw.fetchrow(sql.update_tool_call(columns, events=bool(events)), *args))


async def session_tool_calls(conn: AsyncConnection, session_id: str) -> list[Any]:
    return (await conn.execute(
        select(tool_calls).where(tool_calls.c.session_id == session_id).order_by(tool_calls.c.created_at)
    )).all()


def _like_pattern(q: str) -> str:
    escaped = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def owner_sessions(conn: AsyncConnection, owner: str, *, q: str | None, before: tuple[Any, str] | None,
                         limit: int) -> list[Any]:
    """The owner's sessions newest first (by created_at, then session_id), older than ``before`` if given;
    ``q`` is a case-insensitive substring of the title."""
    stmt = select(sessions).where(sessions.c.owner == owner)
    if q:
        stmt = stmt.where(sessions.c.title.ilike(_like_pattern(q), escape="\\"))
    if before is not None:
        at, session_id = before
        stmt = stmt.where(or_(sessions.c.created_at < at,
                              and_(sessions.c.created_at == at, sessions.c.session_id < session_id)))
    stmt = stmt.order_by(sessions.c.created_at.desc(), sessions.c.session_id.desc()).limit(limit)
    return (await conn.execute(stmt)).all()
