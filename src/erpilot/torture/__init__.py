"""`erpilot torture`: a seeded crash campaign at every failpoint of docs/FAILPOINTS.md, checked from outside.

``campaign`` runs it (run after run, one target each), ``targets`` reads the failpoint table, ``workload`` draws
and drives a run's tool calls and decisions through the HTTP API, ``stack`` is the campaign's own stack (one
service restarted per crash), ``checks`` the invariants checked after each run.
"""
