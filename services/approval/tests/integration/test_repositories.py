"""The repository cases (``tests/repository_cases.py``) on the memory fakes and on PostgreSQL: the same cases, so
the fakes the unit tests trust behave as the SQL does. A database of its own, emptied before each case (the
cases count what is pending or due, which another module's service would change)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select, text

from erpilot.stack.stack import migrate_all
from erpilot_approval.adapters import tables
from erpilot_approval.adapters.store import unit_of_work
from erpilot_platform import advisory_locks
from erpilot_platform.db import create_engine
from erpilot_platform.outbox import Outbox, name_of
from erpilot_platform.testing.backends import scratch_database

from ..fakes import MemoryApprovals
from ..repository_cases import *  # noqa: F403 (the shared cases are collected here)
from ..repository_cases import Units

pytestmark = pytest.mark.integration
TABLES = ("approvals", "votes", "decisions", "edits", "delegations", "expiry_warnings", "webhook_deliveries",
          "audit_log", "audit_checkpoints", "outbox")


@pytest.fixture(scope="module")
def repository_db(database_url):
    with scratch_database(database_url, "erpilot_repos") as url:
        migrate_all(url)
        yield url


@pytest.fixture(scope="module")
async def engine(repository_db):
    engine = create_engine(repository_db, pool_size=2)
    yield engine
    await engine.dispose()


@pytest.fixture(params=["memory", "sql"])
async def units(request, engine) -> Units:
    if request.param == "memory":
        memory = MemoryApprovals()

        async def sent() -> list[tuple[str, str]]:
            return [(message.subject, message.msg_id or "fresh") for message in memory.sent]

        return Units(uow=memory, key=memory.key, emitted=sent)
    async with engine.begin() as conn:
        await conn.execute(text("TRUNCATE " + ", ".join(f"approval.{name}" for name in TABLES)))
    key = Ed25519PrivateKey.generate()

    async def outbox_rows() -> list[tuple[str, str]]:
        async with engine.connect() as conn:
            rows = await conn.execute(select(tables.outbox.c.subject, tables.outbox.c.msg_id)
                                      .order_by(tables.outbox.c.id))
            return [(row.subject, name_of(row.msg_id) or "fresh") for row in rows]

    outbox = Outbox(tables.outbox, lock_key=advisory_locks.APPROVAL_OUTBOX)
    return Units(uow=unit_of_work(engine, outbox, key), key=key, emitted=outbox_rows)
