"""Erpilot on one machine, as `erpilot up` runs it and the e2e tests start it (so both run the same way).

``stack`` composes it (infrastructure URLs, migrations, seed, one process per service and replica) on the
``supervisor``, which starts, watches, restarts and stops processes; ``up`` is `erpilot up` (embedded NATS and
PostgreSQL from ``embedded``, healing, the stack file ``running`` that other commands find it by). Its
security travels with it: the least-privilege NATS users (``nats_security``, their passwords and the JetStream
migration as admin in ``nats_credentials``, the server configuration in ``nats_config``), one database role per
service (``db_roles``), the dev secrets and tokens (``tokens``).
"""
