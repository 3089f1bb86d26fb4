"""Looking after a running deployment from outside its services: its dead letters (``dlq``: list, show and
replay once; ``dlq_connections``: the NATS users a replay publishes as) and the approval service's audit log
(``audit``: verify the hash chain, export it). One package because both are an operator's tools on a live
stack, used by `erpilot dlq` and `erpilot audit` and by the crash campaign's checks."""
