"""The SQL of the tool call cycle's hot statements, run straight on asyncpg (``erpilot_platform.db.
driver_connection``, issue 31 item 4): asyncpg prepares each text once per connection, so every text here is
a constant or built once per shape (``functools.cache``). Columns and names come from ``tables``; JSON values
go as text (``erpilot_platform.raw_sql.values``) and come back parsed. ``statements`` runs them; SQLAlchemy
keeps the cold ones."""

from __future__ import annotations

import functools

from erpilot_agent.adapters.tables import outbox, session_events, sessions, tool_calls
from erpilot_platform.outbox_rows import insert_sql as outbox_insert_sql
from erpilot_platform.raw_sql import column_names
from erpilot_platform.raw_sql import columns as _columns

GET_TOOL_CALL = f"SELECT {_columns(tool_calls)} FROM {tool_calls.fullname} WHERE call_key = $1"
# The call and its session's last_seq, both rows locked (the call against other transitions, the session for the
# events the transition appends).
LOCK_TOOL_CALL = (f"SELECT {_columns(tool_calls, 't')}, s.last_seq FROM {tool_calls.fullname} t "
                  f"JOIN {sessions.fullname} s ON s.session_id = t.session_id WHERE t.call_key = $1 FOR UPDATE")
GET_SESSION = f"SELECT {_columns(sessions)} FROM {sessions.fullname} WHERE session_id = $1"
LOCK_SESSION = GET_SESSION + " FOR UPDATE"
# Numbers ``$2`` events of session ``$1`` under its row lock: the new last_seq.
BUMP_LAST_SEQ = f"UPDATE {sessions.fullname} SET last_seq = last_seq + $2 WHERE session_id = $1 RETURNING last_seq"


@functools.cache
def insert_tool_call(columns: tuple[str, ...]) -> str:
    """Insert a call with ``columns`` (``$1``… in this order); its row with its session's last_seq, the session
    row locked; nothing if a concurrent delivery inserted it first."""
    values = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    return (f"WITH inserted AS (INSERT INTO {tool_calls.fullname} ({column_names(columns)}) VALUES ({values}) "
            f"ON CONFLICT DO NOTHING RETURNING {_columns(tool_calls)}) "
            f"SELECT inserted.*, s.last_seq FROM inserted JOIN {sessions.fullname} s "
            "ON s.session_id = inserted.session_id FOR UPDATE OF s")


def _event_ctes(first: int, *, set_last_seq: bool) -> tuple[list[str], int]:
    """The CTEs that append session events (``$first``: session id, then occurred_at, the seqs, types and data as
    arrays, then the outbox's four arrays; with ``set_last_seq`` the session's new last_seq last); and the next
    parameter number."""
    sid, at, seqs, types, data = (f"${n}" for n in range(first, first + 5))
    ctes = [f"events AS (INSERT INTO {session_events.fullname} (session_id, seq, type, data, occurred_at) "
            f"SELECT {sid}, seq, type, data, {at} FROM unnest({seqs}::int[], {types}::text[], {data}::json[]) "
            "AS e(seq, type, data))",
            f"event_rows AS ({outbox_insert_sql(outbox, first + 5)})"]
    after = first + 9
    if set_last_seq:
        ctes.append(f"numbered AS (UPDATE {sessions.fullname} SET last_seq = ${after} WHERE session_id = {sid})")
        after += 1
    return ctes, after


@functools.cache
def append_events(*, set_last_seq: bool) -> str:
    """Session events and their outbox rows (``_event_ctes`` from ``$1``) in one statement."""
    ctes, _ = _event_ctes(1, set_last_seq=set_last_seq)
    return "WITH " + ", ".join(ctes) + " SELECT 1"


@functools.cache
def update_tool_call(columns: tuple[str, ...], *, events: bool) -> str:
    """Change a call (``$1`` its key, then ``columns`` in this order); with ``events``, the session events of
    ``_event_ctes`` (and the session's new last_seq) in the same statement. Its row as changed."""
    sets = ", ".join(f'"{name}" = ${i}' for i, name in enumerate(columns, start=2))
    update = f"UPDATE {tool_calls.fullname} SET {sets} WHERE call_key = $1 RETURNING {_columns(tool_calls)}"
    if not events:
        return update
    ctes, _ = _event_ctes(len(columns) + 2, set_last_seq=True)
    return "WITH " + ", ".join(ctes) + " " + update
