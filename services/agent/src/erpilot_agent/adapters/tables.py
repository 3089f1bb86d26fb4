"""The agent's tables, all in the ``agent`` schema."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    func,
    literal_column,
)

from erpilot_platform.outbox import outbox_table

SCHEMA = "agent"
metadata = MetaData(schema=SCHEMA)


sessions = Table(
    "sessions", metadata,
    Column("session_id", String(64), primary_key=True),
    Column("owner", String(200), nullable=False, index=True),
    Column("title", Text, nullable=True),
    Column("last_seq", Integer, nullable=False, server_default="0"),
    Column("active_run_id", String(64), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

Index("sessions_owner_newest", sessions.c.owner, sessions.c.created_at, sessions.c.session_id)

session_events = Table(
    "session_events", metadata,
    Column("session_id", String(64), ForeignKey(f"{SCHEMA}.sessions.session_id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", String(40), nullable=False),
    Column("data", JSON, nullable=False),
    Column("occurred_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("session_id", "seq"),
)

# The model's history: every message of every run, in order, exactly as stored (never trimmed).
history = Table(
    "history", metadata,
    Column("session_id", String(64), ForeignKey(f"{SCHEMA}.sessions.session_id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("run_id", String(64), nullable=True),
    Column("entry", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("session_id", "position"),
)

runs = Table(
    "runs", metadata,
    Column("run_id", String(64), primary_key=True),
    Column("session_id", String(64), ForeignKey(f"{SCHEMA}.sessions.session_id"), nullable=False, index=True),
    Column("status", String(20), nullable=False),  # running | waiting | finished | failed
    # The id of the user message that started the run: a redelivered post_message finds its run.
    Column("message_id", String(100), nullable=True),
    Column("error", JSON, nullable=True),
    Column("steps", Integer, nullable=False, server_default="0"),
    # Failed attempts in a row and when the first of them happened (the run's RetryBudget).
    Column("failed_attempts", Integer, nullable=False, server_default="0"),
    Column("failing_since", DateTime(timezone=True), nullable=True),
    # The requester assertion of the message that started the run: every call of the run forwards it.
    Column("assertion", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("session_id", "message_id", name="runs_session_message"),
)
Index("runs_unfinished", runs.c.status, postgresql_where=runs.c.status.in_(["running", "waiting"]))

# ``call_id`` is unique per session (a client's or the model's id); ``call_key`` (domain.call_identity,
# derived from both) is the global identity every lock, lookup and transition uses.
tool_calls = Table(
    "tool_calls", metadata,
    Column("call_key", String(80), primary_key=True),
    Column("call_id", String(100), nullable=False),
    Column("session_id", String(64), ForeignKey(f"{SCHEMA}.sessions.session_id"), nullable=False, index=True),
    Column("run_id", String(64), nullable=True, index=True),
    Column("source", String(20), nullable=False),  # "model" | "external"
    Column("tool", String(64), nullable=False),
    Column("request_hash", String(80), nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("operation_id", String(100), nullable=False, unique=True),
    Column("status", String(30), nullable=False),  # domain.tool_calls.CallState
    # The rest of the lifecycle (approval requirement, resolutions, decider, comment, pending approval).
    Column("lifecycle", JSON, nullable=False),
    Column("outcome", String(30), nullable=True),
    Column("result", JSON, nullable=True),
    Column("error", JSON, nullable=True),
    Column("pending_id", String(100), nullable=True, index=True),
    # The requester assertion the call's ERP commands carry (the command's, or its run's), forwarded unchanged.
    Column("assertion", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("session_id", "call_id", name="tool_calls_session_call"),
)
Index("tool_calls_unfinished", tool_calls.c.status, postgresql_where=tool_calls.c.status != "finished")
# The external calls their request's handler has not driven yet (a read or draft not run, a write not prepared):
# what the agent's pass over left calls reads every 30 s (``SqlCallRepository.left_by_their_request``), oldest first.
# Few rows at any time, so the pass is a look in a small index, not a scan of every call ever made. Written with
# its constants inline: the query repeats this very predicate, so PostgreSQL can prove it (a bound parameter would
# hide the values from a generic plan, and the partial index would not be used).
LEFT_BY_THEIR_REQUEST = and_(tool_calls.c.source == literal_column("'external'"),
                             tool_calls.c.status.in_([literal_column("'running'"), literal_column("'preparing'")]))
Index("tool_calls_left_by_request", tool_calls.c.created_at, postgresql_where=LEFT_BY_THEIR_REQUEST)

outbox = outbox_table(metadata)
