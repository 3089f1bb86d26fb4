"""The agent's migrations build exactly the tables the code uses (``adapters.tables``): nothing a migration
forgot (0008: the assertion columns), nothing left behind (the grant and commit-intent columns)."""

from __future__ import annotations

import pytest

from erpilot_agent.adapters.tables import SCHEMA, metadata
from erpilot_platform.testing.schema import schema_differences

pytestmark = pytest.mark.integration


def _differences(sync_conn) -> list:
    return schema_differences(sync_conn, metadata, SCHEMA)


async def test_the_migrated_agent_schema_is_the_one_the_code_uses(engine):
    async with engine.connect() as conn:
        differences = await conn.run_sync(_differences)

    assert differences == []
