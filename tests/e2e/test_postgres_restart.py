"""A PostgreSQL restart under a running stack: the pools hold only dead connections afterwards
(there is no pre-ping); the very next request, read or write, still succeeds."""

from __future__ import annotations

import os
import shutil

import pytest

from erpilot.stack.stack import Stack, free_port, migrate_all, seed
from erpilot_platform.embedded import EmbeddedNats
from erpilot_platform.embedded_pg import EmbeddedPostgres
from erpilot_platform.testing.backends import postgres_scratch_dir
from tests.e2e.conftest import SECRET, Api
from tests.e2e.test_write_flow import place_order

pytestmark = pytest.mark.e2e


@pytest.fixture
def own_postgres():
    """A PostgreSQL of this test alone, so it can be restarted without disturbing other tests (outside
    pytest's tmp tree, which another pytest session may reset to 0700 while the server runs as its user)."""
    if os.environ.get("ERPILOT_TEST_DATABASE_URL") or os.environ.get("ERPILOT_TEST_BACKEND"):
        pytest.skip("restarting PostgreSQL needs the embedded server")
    where = postgres_scratch_dir()
    postgres = EmbeddedPostgres(where / "pg")
    try:
        url = postgres.start()
        migrate_all(url)
        seed(url)
        yield postgres
    finally:
        postgres.stop()
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def pg_stack(own_postgres, tmp_path):
    # A NATS server of its own too: the session's carries the integration tests' durable consumers.
    nats = EmbeddedNats(tmp_path / "nats")
    running = Stack(nats.start(), own_postgres.url, tmp_path / "stack", http_port=free_port(),
                    env={"ERPILOT_AUTH_SECRET": SECRET})
    try:
        running.start()
        running.wait_ready()
        yield running
    finally:
        running.stop()
        nats.stop()


def test_the_next_requests_after_a_postgres_restart_succeed(pg_stack, own_postgres):
    user = Api(pg_stack.base_url, "pg-restart-user", "requester")
    approver = Api(pg_stack.base_url, "pg-restart-approver", "approver")
    session_id = user.new_session()
    assert user.call(session_id, "get_product", {"sku": "SKU-PAPER-A4"}).status_code == 200

    own_postgres.stop()
    assert own_postgres.start() == pg_stack.database_url  # same socket: the services keep their URL

    # No readiness wait in between: these are the first uses of the pools' dead connections.
    read = user.call(session_id, "get_product", {"sku": "SKU-PAPER-A3"})
    assert read.status_code == 200, read.text
    assert read.json()["result"]["sku"] == "SKU-PAPER-A3"
    assert place_order(user, approver, session_id, [("SKU-PAPER-A4", 1)])["order_id"]
