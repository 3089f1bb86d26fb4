"""The SQL of the approval cycle's hot statements (request, decision, the audit chain's appends), run straight on
asyncpg (``erpilot_platform.db.driver_connection``, issue 31 item 4): asyncpg prepares each text once per
connection, so every text here is a constant (or built once, ``functools.cache``). Columns come from ``tables``;
JSON values go as text (``erpilot_platform.raw_sql.values``) and come back parsed. ``repository`` and
``audit_log`` run them; SQLAlchemy keeps the cold ones."""

from __future__ import annotations

import functools

from erpilot_approval.adapters.tables import ESCALATION_DUE, approvals, audit_log, decisions, votes
from erpilot_platform import advisory_locks
from erpilot_platform.raw_sql import column_names, columns

APPROVALS = approvals.fullname
GET_APPROVAL = f"SELECT {columns(approvals)} FROM {APPROVALS} WHERE pending_id = $1"
LOCK_APPROVAL = GET_APPROVAL + " FOR UPDATE"
GET_BY_OPERATION = f"SELECT {columns(approvals)} FROM {APPROVALS} WHERE operation_id = $1"
FIRST_OF_CALL = (f"SELECT {columns(approvals)} FROM {APPROVALS} "
                 "WHERE session_id = $1 AND call_id = $2 AND supersedes IS NULL")
TRACE_CONTEXT = f"SELECT trace_context FROM {APPROVALS} WHERE pending_id = $1"
VOTES_OF = f"SELECT {columns(votes)} FROM {votes.fullname} WHERE pending_id = ANY($1::text[]) ORDER BY vote_id"

VOTE_COLUMNS = ("pending_id", "voter", "role", "action", "fingerprint", "comment", "voted_at", "on_behalf_of")
APPEND_VOTE = f"INSERT INTO {votes.fullname} ({column_names(VOTE_COLUMNS)}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
DECISION_COLUMNS = ("pending_id", "actor", "action", "fingerprint", "comment", "decided_at", "on_behalf_of")
APPEND_DECISION = (f"INSERT INTO {decisions.fullname} ({column_names(DECISION_COLUMNS)}) "
                   "VALUES ($1, $2, $3, $4, $5, $6, $7)")

OUTCOME_COLUMNS = ("status", "decided_by", "decided_at", "comment", "superseded_by", "decided_on_behalf_of")


def _save(names: tuple[str, ...]) -> str:
    sets = ", ".join(f'"{name}" = ${i}' for i, name in enumerate(names, start=2))
    return f"UPDATE {APPROVALS} SET {sets} WHERE pending_id = $1"


# How an approval left pending (``$1`` its id, then OUTCOME_COLUMNS), with its grant (``$8``) or not.
SAVE_OUTCOME = _save(OUTCOME_COLUMNS)
SAVE_OUTCOME_WITH_GRANT = _save((*OUTCOME_COLUMNS, "grant"))

@functools.cache
def insert_new(names: tuple[str, ...]) -> str:
    """Insert an approval with these columns unless one for its ``operation_id`` exists: its id, or nothing."""
    values = ", ".join(f"${i}" for i in range(1, len(names) + 1))
    return (f"INSERT INTO {APPROVALS} ({column_names(names)}) VALUES ({values}) "
            "ON CONFLICT (operation_id) DO NOTHING RETURNING pending_id")


SECONDS_TO_NEXT_DEADLINE = (f"SELECT extract(epoch FROM min(expires_at) - clock_timestamp()) FROM {APPROVALS} "
                            "WHERE status = 'pending'")
SECONDS_TO_NEXT_ESCALATION = (f"SELECT extract(epoch FROM min(escalate_at) - clock_timestamp()) FROM {APPROVALS} "
                              f"WHERE {ESCALATION_DUE} AND expires_at > clock_timestamp()")

# The audit chain: one writer at a time (a transaction-level advisory lock), the clock, the head unless known,
# whether an event of a kind exists for an operation, and the append.
AUDIT_LOCK = f"SELECT pg_advisory_xact_lock({int(advisory_locks.APPROVAL_AUDIT)})"
_LAST = f"(SELECT {{0}} FROM {audit_log.fullname} ORDER BY seq DESC LIMIT 1)"
_DONE = f"EXISTS (SELECT 1 FROM {audit_log.fullname} WHERE kind = $1 AND operation_id = $2)"


def _before_append(*, head: bool, once: bool) -> str:
    selected = ["clock_timestamp() AS at"]
    if head:
        selected += [f"{_LAST.format('seq')} AS seq", f"{_LAST.format('hash')} AS hash"]
    if once:
        selected.append(f"{_DONE} AS done")
    return "SELECT " + ", ".join(selected)


BEFORE_APPEND = {(head, once): _before_append(head=head, once=once) for head in (False, True)
                 for once in (False, True)}
AUDIT_COLUMNS = ("seq", "at", "kind", "pending_id", "operation_id", "actor", "data", "prev_hash", "hash", "signature")
AUDIT_APPEND = (f"INSERT INTO {audit_log.fullname} ({column_names(AUDIT_COLUMNS)}) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
