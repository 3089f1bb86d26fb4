"""The approval service's tables, all in the ``approval`` schema."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Boolean, Column, DateTime, Index, Integer, MetaData, String, Table, Text, func

from erpilot_platform.inbox import inbox_table
from erpilot_platform.outbox import outbox_table

SCHEMA = "approval"
metadata = MetaData(schema=SCHEMA)

approvals = Table(
    "approvals", metadata,
    Column("pending_id", String(100), primary_key=True),
    Column("call_id", String(100), nullable=False, index=True),
    Column("session_id", String(64), nullable=False, index=True),
    Column("tool", String(64), nullable=False),
    Column("tool_schema_version", Integer, nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("fingerprint", String(80), nullable=False),
    Column("operation_id", String(100), nullable=False, unique=True),
    Column("risk", String(20), nullable=False),
    Column("preview", JSON, nullable=False),
    Column("required_roles", JSON, nullable=False),
    Column("separation_of_duties", Boolean, nullable=False),
    Column("requested_by", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Computed once from the policy ttl when the approval is created; never recomputed.
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("status", String(20), nullable=False),
    Column("decided_by", String(200), nullable=True),
    Column("decided_at", DateTime(timezone=True), nullable=True),
    Column("comment", Text, nullable=True),
    Column("policy_version", String(80), nullable=False),
    Column("superseded_by", String(100), nullable=True),
    Column("supersedes", String(100), nullable=True),
    Column("grant", JSON, nullable=True),
)
Index("approvals_pending_deadline", approvals.c.expires_at, postgresql_where=approvals.c.status == "pending")

# Every decision attempt that changed something, append-only (room for quorum votes and an audit chain).
decisions = Table(
    "decisions", metadata,
    Column("decision_id", BigInteger, primary_key=True, autoincrement=True),
    Column("pending_id", String(100), nullable=False, index=True),
    Column("actor", String(200), nullable=False),
    Column("action", String(20), nullable=False),
    Column("fingerprint", String(80), nullable=False),
    Column("comment", Text, nullable=True),
    Column("decided_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

outbox = outbox_table(metadata)
inbox = inbox_table(metadata)
