"""Fixtures shared by every test tier.

- ``backend``: NATS and PostgreSQL for the whole run (embedded wheels by default; existing servers
  with ERPILOT_TEST_NATS_URL / ERPILOT_TEST_DATABASE_URL; Docker with ERPILOT_TEST_BACKEND=docker).
- ``database_url``: that database, migrated (every schema) and seeded with the demo catalog.
- ``broker``: a connected faststream NATS broker with every stream and durable consumer declared (the
  JetStream migration of `erpilot migrate`), for tests that talk
  NATS directly (integration tests that run a service in-process via its ``build()``).
"""

from __future__ import annotations

import pytest

from erpilot_platform.testing.backends import start_backend


@pytest.fixture(scope="session")
def backend(tmp_path_factory):
    started = start_backend(tmp_path_factory.mktemp("backend"))
    yield started
    started.stop()


@pytest.fixture(scope="session")
def database_url(backend) -> str:
    from erpilot.stack.stack import migrate_all, seed

    migrate_all(backend.database_url)
    seed(backend.database_url)
    return backend.database_url


@pytest.fixture(scope="session")
def nats_url(backend) -> str:
    return backend.nats_url


@pytest.fixture(scope="session")
async def broker(nats_url):
    from faststream.nats import NatsBroker

    from erpilot.stack.nats_credentials import migrate_jetstream_on

    client = NatsBroker(nats_url, max_reconnect_attempts=-1)
    await client.connect()
    await migrate_jetstream_on(client.config.connection_state.stream)  # as `erpilot migrate` does
    yield client
    await client.stop()
