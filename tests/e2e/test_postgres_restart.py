"""A PostgreSQL restart under a running stack: the pools hold only dead connections afterwards
(there is no pre-ping); the very next request, read or write, still succeeds."""

from __future__ import annotations

import os

import pytest

from erpilot.stack import Stack, free_port, migrate_all, seed
from erpilot_platform.embedded_pg import EmbeddedPostgres
from tests.e2e.conftest import SECRET, Api
from tests.e2e.test_write_flow import place_order

pytestmark = pytest.mark.e2e


@pytest.fixture
def own_postgres(tmp_path):
    """A PostgreSQL of this test alone, so it can be restarted without disturbing other tests."""
    if os.environ.get("ERPILOT_TEST_DATABASE_URL") or os.environ.get("ERPILOT_TEST_BACKEND"):
        pytest.skip("restarting PostgreSQL needs the embedded server")
    postgres = EmbeddedPostgres(tmp_path / "pg")
    url = postgres.start()
    migrate_all(url)
    seed(url)
    yield postgres
    postgres.stop()


@pytest.fixture
def pg_stack(own_postgres, nats_url, tmp_path):
    running = Stack(nats_url, own_postgres.url, tmp_path / "stack", http_port=free_port(),
                    env={"ERPILOT_AUTH_SECRET": SECRET})
    running.start()
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


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
