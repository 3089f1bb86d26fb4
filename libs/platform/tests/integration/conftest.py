"""An outbox table of its own per test: a fresh schema in the shared database, dropped afterwards."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import MetaData

from erpilot_platform.db import create_engine
from erpilot_platform.outbox import Outbox, outbox_table


@pytest.fixture
async def outbox_rows_table(database_url):
    """(engine, table): an empty outbox table in a schema of its own."""
    schema = f"outbox_test_{uuid.uuid4().hex[:8]}"
    metadata = MetaData(schema=schema)
    table = outbox_table(metadata)
    engine = create_engine(database_url)
    async with engine.begin() as conn:
        await conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        await conn.run_sync(metadata.create_all)
    yield engine, table
    async with engine.begin() as conn:
        await conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    await engine.dispose()


@pytest.fixture
def outbox(outbox_rows_table):
    """(engine, Outbox) over that table, with a lock key of its own."""
    engine, table = outbox_rows_table
    return engine, Outbox(table, lock_key=hash(table.schema) & 0x7FFFFFFF)
