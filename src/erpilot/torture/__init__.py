"""`erpilot torture`: a seeded crash campaign at every failpoint of docs/FAILPOINTS.md, checked from outside.

``campaign`` runs it (run after run, one target each), ``targets`` reads the failpoint table, ``plan`` draws a
run's tool calls and decisions from its target and seed, ``workload`` carries them out through the HTTP API,
``stack`` is the campaign's own stack (one service restarted per crash); after each run ``checks`` holds the
calls and the session events against the ledger, ``approval_checks`` the approvals, grants and audit chain.
"""
