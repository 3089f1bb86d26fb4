"""Every PostgreSQL advisory lock key Erpilot takes, in one table (issue 13).

The services keep their tables in schemas of one database, but an advisory lock key is
database-wide: schemas do not separate them. Two services that pick the same number serialise each
other's unrelated transactions, and nothing reports it. The approval service's audit chain once had
the agent outbox relay's key: each audit append (a request, a decision, an ERP commit's outcome) made
the agent's relay find its lock taken and retry 200 ms later, which put that wait on most tool calls'
``tool_finished`` (p50 262 ms instead of 60 ms at one in flight). Declare a new key here, never in
the service, so ``libs/platform/tests/unit/test_advisory_locks.py`` sees that it is unused.

The one-key form (``pg_advisory_lock(bigint)``) and the two-key form (``pg_advisory_lock(int, int)``)
are separate key spaces in PostgreSQL; ``NAMESPACES`` are first keys of the two-key form.
"""

from __future__ import annotations

MIGRATIONS = 7_311_990_001  # erpilot_platform.migrations: one migrator at a time
ERP_OUTBOX = 7_311_990_101  # the ERP's outbox relay
APPROVAL_OUTBOX = 7_311_990_201  # the approval service's outbox relay
# The approval audit chain's appends. It was 7_311_990_301 (the agent relay's) until issue 13; while an
# old and a new approval replica run side by side they take different keys, and two appends of the same
# ``seq`` then meet the table's primary key (one fails and is retried): the chain never forks.
APPROVAL_AUDIT = 7_311_990_202
APPROVAL_DELEGATIONS = 7_311_990_203  # the approval service's gives of delegations, one at a time (no chains)
AGENT_OUTBOX = 7_311_990_301  # the agent's outbox relay

KEYS = {"MIGRATIONS": MIGRATIONS, "ERP_OUTBOX": ERP_OUTBOX, "APPROVAL_OUTBOX": APPROVAL_OUTBOX,
        "APPROVAL_AUDIT": APPROVAL_AUDIT,
        "APPROVAL_DELEGATIONS": APPROVAL_DELEGATIONS, "AGENT_OUTBOX": AGENT_OUTBOX}

AGENT_RUNS = 7_311_002  # the agent's run drivers: (AGENT_RUNS, hashtext(session_id))
NAMESPACES = {"AGENT_RUNS": AGENT_RUNS}
