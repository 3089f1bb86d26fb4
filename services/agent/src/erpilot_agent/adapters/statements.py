"""The SQL statements on sessions, session events and tool calls (agent schema) that the repositories of
``sql_calls`` build on. Session events are written with their outbox rows (the ``Outbox`` given: the
service's own, never a module global), in one statement where the caller already holds the session's lock."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_agent.adapters.tables import session_events, sessions, tool_calls
from erpilot_contracts.sessions.v1 import SessionEventV1
from erpilot_contracts.subjects import session_events_subject
from erpilot_platform.outbox import Outbox, insert_rows


def now() -> datetime:
    return datetime.now(UTC)


async def create_session(conn: AsyncConnection, session_id: str, owner: str, title: str | None) -> None:
    # A concurrent copy of the command may insert first: this one then waits for it and inserts nothing.
    await conn.execute(insert(sessions).values(session_id=session_id, owner=owner, title=title)
                       .on_conflict_do_nothing(index_elements=[sessions.c.session_id]))


async def get_session(conn: AsyncConnection, session_id: str, *, lock: bool = False) -> Any:
    stmt = select(sessions).where(sessions.c.session_id == session_id)
    if lock:
        stmt = stmt.with_for_update()
    return (await conn.execute(stmt)).first()


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
    if last_seq is None:
        last_seq = await conn.scalar(
            update(sessions).where(sessions.c.session_id == session_id)
            .values(last_seq=sessions.c.last_seq + len(events)).returning(sessions.c.last_seq)
        ) - len(events)
        [_, *writes], seqs = _event_writes(outbox, session_id, events, last_seq)  # numbered already
    else:
        writes, seqs = _event_writes(outbox, session_id, events, last_seq)
    *first, last = writes
    await conn.execute(_with(last, first))
    return seqs


def _event_writes(outbox: Outbox, session_id: str, events: list[tuple[str, dict[str, Any]]],
                  last_seq: int) -> tuple[list[Any], list[int]]:
    """The writes that append ``events`` after ``last_seq`` (the session's, under its row lock): the new
    ``last_seq``, the events and their outbox rows; and the events' seqs."""
    occurred_at = now()
    stored = [SessionEventV1(seq=seq, type=type_, session_id=session_id, occurred_at=occurred_at, data=data)
              for seq, (type_, data) in enumerate(events, start=last_seq + 1)]
    return [
        update(sessions).where(sessions.c.session_id == session_id).values(last_seq=last_seq + len(events)),
        insert_rows(session_events, [
            {"session_id": session_id, "seq": e.seq, "type": e.type, "data": e.data, "occurred_at": occurred_at}
            for e in stored]),
        outbox.insert([(session_events_subject(session_id), e, f"session:{session_id}:{e.seq}") for e in stored]),
    ], [e.seq for e in stored]


def _with(statement: Any, writes: list[Any]) -> Any:
    """``statement`` with ``writes`` as data-modifying CTEs: one statement, one round trip (PostgreSQL runs
    them all on one snapshot; they touch other rows than ``statement``, so none needs to see another)."""
    return statement.add_cte(*(write.cte(f"write_{i}") for i, write in enumerate(writes)))


async def list_events(conn: AsyncConnection, session_id: str, after_seq: int = 0, limit: int | None = None
                      ) -> list[Any]:
    return (await conn.execute(
        select(session_events).where(session_events.c.session_id == session_id, session_events.c.seq > after_seq)
        .order_by(session_events.c.seq).limit(limit)
    )).all()


# The statements every tool call runs, built once with their parameters as bind parameters: building a
# statement and its cache key costs more CPU than the round trip's own client work (the agent's profile
# under ``erpilot bench``); a statement built once keeps its cache key (SQLAlchemy memoizes it).
_GET_TOOL_CALL = select(tool_calls).where(tool_calls.c.call_key == bindparam("call_key"))
_LOCK_TOOL_CALL = (
    select(tool_calls, sessions.c.last_seq).join(sessions, sessions.c.session_id == tool_calls.c.session_id)
    .where(tool_calls.c.call_key == bindparam("call_key")).with_for_update()
)


async def get_tool_call(conn: AsyncConnection, call_key: str, *, lock: bool = False) -> Any:
    """The call with this ``call_key`` (domain.call_identity: session id and call id together).

    ``lock``: with its session's ``last_seq``, both rows locked until the transaction ends (the call
    against other transitions, the session for the events the transition appends: ``append_events``)."""
    return (await conn.execute(_LOCK_TOOL_CALL if lock else _GET_TOOL_CALL, {"call_key": call_key})).first()


@functools.cache
def _insert_tool_call(columns: frozenset[str]) -> Any:
    """The insert of ``insert_tool_call`` for these columns (one statement per set of columns given)."""
    inserted = (insert(tool_calls).values({name: bindparam(name, type_=tool_calls.c[name].type) for name in columns})
                .on_conflict_do_nothing().returning(tool_calls).cte("inserted"))
    return (select(inserted, sessions.c.last_seq).join(sessions, sessions.c.session_id == inserted.c.session_id)
            .with_for_update(of=sessions))


async def insert_tool_call(conn: AsyncConnection, **values: Any) -> Any:
    """Insert a new call and return its row with its session's ``last_seq``, the session row locked (as
    ``get_tool_call(lock=True)``); None if a concurrent delivery of the same command inserted it first."""
    return (await conn.execute(_insert_tool_call(frozenset(values)), values)).first()


async def update_tool_call(conn: AsyncConnection, call_key: str, *, outbox: Outbox | None = None,
                           events: list[tuple[str, dict[str, Any]]] = (), session: tuple[str, int] | None = None,
                           **values: Any) -> Any:
    """Change the call and return its row as changed (None if there is no such call); with ``events``
    appended to ``session`` (its id and ``last_seq`` under its row lock) in the same statement."""
    stmt = update(tool_calls).where(tool_calls.c.call_key == call_key).values(updated_at=now(), **values)
    if events:
        session_id, last_seq = session
        stmt = _with(stmt, _event_writes(outbox, session_id, list(events), last_seq)[0])
    return (await conn.execute(stmt.returning(tool_calls))).first()


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
