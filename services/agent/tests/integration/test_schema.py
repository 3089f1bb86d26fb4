"""The agent's migrations build exactly the tables the code uses (``adapters.tables``): nothing a migration
forgot (0008: the assertion columns), nothing left behind (the grant and commit-intent columns)."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from erpilot_agent.adapters.tables import SCHEMA, metadata

pytestmark = pytest.mark.integration


def _differences(sync_conn) -> list:
    context = MigrationContext.configure(sync_conn, opts={
        "include_schemas": True, "version_table_schema": SCHEMA,
        "include_name": lambda name, type_, parent: type_ != "schema" or name == SCHEMA,
        "include_object": lambda obj, name, type_, reflected, compare_to: not (
            type_ == "table" and name == "alembic_version")})
    return compare_metadata(context, metadata)


async def test_the_migrated_agent_schema_is_the_one_the_code_uses(engine):
    async with engine.connect() as conn:
        differences = await conn.run_sync(_differences)

    assert differences == []
