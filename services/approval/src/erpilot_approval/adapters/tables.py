"""The approval service's tables, all in the ``approval`` schema."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.elements import ColumnElement

from erpilot_platform.outbox import outbox_table

SCHEMA = "approval"
# The closed set of roles (SPEC §5); each has a partial index that serves the "may decide" list.
ROLES = ("requester", "approver", "manager", "admin")
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
    Column("required_roles", ARRAY(String(20)), nullable=False),
    Column("separation_of_duties", Boolean, nullable=False),
    Column("requested_by", String(200), nullable=False),
    # created_at and expires_at come from the database clock, to the microsecond.
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
    Column("stock_check", String(20), nullable=True),
    # The trace of the tool call that asked (W3C headers): decide and expiry continue it (ARCHITECTURE "Tracing").
    Column("trace_context", JSON, nullable=True),
    # Who made this version by an edit, and every editor of the call up to it (separation of duties).
    Column("edited_by", String(200), nullable=True),
    Column("editors", ARRAY(String(200)), nullable=False, server_default=text("'{}'")),
    # Quorum: distinct people who must approve this version (policy, fixed when stored; migration 0006).
    Column("approvals_required", Integer, nullable=False, server_default="1"),
    # Distinct rejecters that end this version rejected (policy, fixed when stored; migration 0008).
    Column("rejections_to_reject", Integer, nullable=False, server_default="1"),
    # The delegator whose roles ``decided_by`` decided with (SPEC §10 delegation; migration 0012).
    Column("decided_on_behalf_of", String(200), nullable=True),
    # Escalation (policy escalate_after / escalate_to, fixed when stored; migration 0012): at ``escalate_at`` an
    # undecided version gains ``escalate_to`` in ``required_roles``, once (``escalated_at``); expires_at stays.
    Column("escalate_to", String(20), nullable=True),
    Column("agent_reason", Text, nullable=True),  # the agent's claim, shown as "the agent says" (migration 0015)
    Column("escalate_at", DateTime(timezone=True), nullable=True),
    Column("escalated_at", DateTime(timezone=True), nullable=True),
)
# The sweeper's "next deadline" and "what is due" lookups.
Index("approvals_pending_deadline", approvals.c.expires_at, postgresql_where=approvals.c.status == "pending")
# One call, one write: a second first version of one call is never stored (migration 0016; edits supersede).
Index("uq_approvals_call", approvals.c.session_id, approvals.c.call_id, unique=True,
      postgresql_where=approvals.c.supersedes.is_(None))
# The escalation sweeper's "next escalation" and "what is due" lookups.
ESCALATION_DUE = "status = 'pending' AND escalated_at IS NULL AND escalate_at IS NOT NULL"
Index("approvals_escalation_due", approvals.c.escalate_at, postgresql_where=text(ESCALATION_DUE))


def role_predicate(role: str) -> str:
    """The SQL of "``role`` may decide" (a literal: partial indexes only match constant predicates)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    return f"required_roles @> ARRAY['{role}']::varchar(20)[]"


for _role in ROLES:
    Index(f"approvals_list_{_role}", approvals.c.status, approvals.c.created_at.desc(), approvals.c.pending_id.desc(),
          postgresql_where=text(role_predicate(_role)))

# What an approval's arguments name, for "may this person read that draft or order" (SPEC §10): the ids the write
# tools take (submit_order: draft_id; cancel_order, refund_payment: order_id), each with an index where present.
NAMED_IN_ARGUMENTS = ("draft_id", "order_id")


def named_in_arguments(key: str) -> ColumnElement[str]:
    """``arguments ->> '<key>'`` with the key a literal, the expression its index is on (migration 0012)."""
    if key not in NAMED_IN_ARGUMENTS:
        raise ValueError(f"arguments name no {key!r}")
    return approvals.c.arguments.op("->>", return_type=Text)(literal_column(f"'{key}'"))


for _key in NAMED_IN_ARGUMENTS:
    Index(f"approvals_naming_{_key}", named_in_arguments(_key), postgresql_where=named_in_arguments(_key).isnot(None))

# Every change of an approval's status, append-only: decisions (votes, room for quorum), expiries
# (actor "system:expiry") and edits (action "edit"). Nothing ever updates or deletes a row here.
decisions = Table(
    "decisions", metadata,
    Column("decision_id", BigInteger, primary_key=True, autoincrement=True),
    Column("pending_id", String(100), nullable=False, index=True),
    Column("actor", String(200), nullable=False),
    Column("action", String(20), nullable=False),
    Column("fingerprint", String(80), nullable=False),
    Column("comment", Text, nullable=True),
    Column("decided_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("on_behalf_of", String(200), nullable=True),  # a delegate's decision: for whom (migration 0012)
)

# One vote per person and version (quorum), written under the approval's row lock; never updated.
votes = Table(
    "votes", metadata,
    Column("vote_id", BigInteger, primary_key=True, autoincrement=True),
    Column("pending_id", String(100), nullable=False),
    Column("voter", String(200), nullable=False),
    Column("role", String(20), nullable=False),
    Column("action", String(20), nullable=False),
    Column("fingerprint", String(80), nullable=False),
    Column("comment", Text, nullable=True),
    Column("voted_at", DateTime(timezone=True), nullable=False),
    # A delegate's vote: the delegator whose authority it used (migration 0012).
    Column("on_behalf_of", String(200), nullable=True),
    UniqueConstraint("pending_id", "voter", name="votes_one_per_person"),
)
# One vote per authority too: Bob's own vote and his delegate's vote for him are one vote.
Index("votes_one_per_principal", votes.c.pending_id, func.coalesce(votes.c.on_behalf_of, votes.c.voter), unique=True)

# Delegations (domain/delegation.py): ``delegate`` decides with ``delegator``'s ``roles`` for ``tools`` (NULL: every
# write tool) until ``until`` unless ``revoked_at``. Rows are never deleted: a revocation is a time.
delegations = Table(
    "delegations", metadata,
    Column("delegation_id", String(100), primary_key=True),  # chosen by the gateway: a redelivery stores one
    Column("delegator", String(200), nullable=False, index=True),
    Column("delegate", String(200), nullable=False, index=True),
    Column("roles", ARRAY(String(20)), nullable=False),
    Column("tools", ARRAY(String(64)), nullable=True),
    Column("until", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

# Standing approvals (domain/standing.py): a giver approves one write tool in one session in advance, up to an
# amount, until a time. Never deleted: a revocation is a time.
standing_approvals = Table(
    "standing_approvals", metadata,
    Column("standing_id", String(100), primary_key=True),  # chosen by the gateway: a redelivery stores one
    Column("giver", String(200), nullable=False, index=True),
    Column("roles", ARRAY(String(20)), nullable=False),
    Column("session_id", String(100), nullable=False),
    Column("tool", String(64), nullable=False),
    Column("max_amount_minor", BigInteger, nullable=True),
    Column("until", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)
Index("standing_approvals_session_tool", standing_approvals.c.session_id, standing_approvals.c.tool)

# What standing approvals did for one chat run (domain/standing_runs.py): writes they approved, and the run's end.
standing_runs = Table(
    "standing_runs", metadata,
    Column("session_id", String(100), primary_key=True),
    Column("run_id", String(100), primary_key=True),
    Column("approved", Integer, nullable=False, server_default="0"),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    Column("ended_by", String(200), nullable=True),
)

# Outgoing webhooks (service_layer/webhooks.py): one row per (event, endpoint), written when the event is
# consumed, delivered by the dispatcher; the row is also the dead letter once it gives up.
webhook_deliveries = Table(
    "webhook_deliveries", metadata,
    Column("delivery_id", BigInteger, primary_key=True, autoincrement=True),
    Column("event_id", String(40), nullable=False),
    Column("event_type", String(40), nullable=False),
    Column("url", Text, nullable=False),
    Column("pending_id", String(100), nullable=True),
    Column("body", Text, nullable=False),  # the exact bytes signed and sent, on every attempt
    Column("status", String(20), nullable=False, server_default="pending"),  # pending|delivered|dead|skipped
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("last_error", Text, nullable=True),
    UniqueConstraint("event_id", "url", name="webhook_deliveries_event_url"),
)
Index("webhook_deliveries_due", webhook_deliveries.c.next_attempt_at,
      postgresql_where=webhook_deliveries.c.status == "pending")

# One row per approval whose approval_expiring warning was emitted (in the warning's transaction).
expiry_warnings = Table(
    "expiry_warnings", metadata,
    Column("pending_id", String(100), primary_key=True),
    Column("warned_at", DateTime(timezone=True), nullable=False),
)

# Edit intents (service_layer/edits.py): an edit is recorded here, under the old version's row lock, before the
# ERP is asked to prepare the edited operation; the ledger's ``cmd.approval.request`` with ``supersedes`` is
# accepted only against the intent it finds here (the editor comes from this row, never from the message).
# ``refusal``: how the intent ended without a new version (the old one ended meanwhile, the policy refused it).
edits = Table(
    "edits", metadata,
    Column("operation_id", String(100), primary_key=True),  # the new version's, derived (edited_operation_id)
    Column("pending_id", String(100), nullable=False),  # the version being edited
    Column("editor", String(200), nullable=False),
    Column("fingerprint", String(80), nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("refusal", JSON(none_as_null=True), nullable=True),  # SQL NULL, not JSON null, while it waits
)

# The audit log (domain/audit.py): append-only hash chain, written in the transaction of the change it records.
# The service's database role may INSERT and SELECT here, never UPDATE or DELETE (src/erpilot/stack/db_roles.py).
audit_log = Table(
    "audit_log", metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),  # gap-free, assigned under the chain lock
    Column("at", DateTime(timezone=True), nullable=False),
    Column("kind", String(20), nullable=False),
    Column("pending_id", String(100), nullable=True),
    Column("operation_id", String(100), nullable=True),
    Column("actor", String(200), nullable=True),
    Column("data", JSON, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    Column("signature", String(100), nullable=False),
)
Index("audit_log_pending", audit_log.c.pending_id)
Index("audit_log_operation", audit_log.c.operation_id)

# Signed heads of the chain (periodic; verify may start from the latest one).
audit_checkpoints = Table(
    "audit_checkpoints", metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("hash", String(64), nullable=False),
    Column("signed_at", DateTime(timezone=True), nullable=False),
    Column("signature", String(100), nullable=False),
)
AUDIT_TABLES = ("audit_log", "audit_checkpoints")

outbox = outbox_table(metadata)
