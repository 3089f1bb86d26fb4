"""The ERP's migrations build exactly the tables the code uses: the core's (``adapters.tables``) and each record
kind's, which its own module puts on the same metadata (``adapters.records``; 0005: ``credit_notes``). A record
module that is not imported with the tables, or a migration that forgot one, shows here as a difference."""

from __future__ import annotations

import pytest

from erpilot_erp.adapters.tables import SCHEMA, metadata
from erpilot_platform.db import create_engine
from erpilot_platform.testing.schema import schema_differences

pytestmark = pytest.mark.integration


def _differences(sync_conn) -> list:
    return schema_differences(sync_conn, metadata, SCHEMA)


async def test_the_migrated_erp_schema_is_the_one_the_code_uses(database_url):
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            differences = await conn.run_sync(_differences)
    finally:
        await engine.dispose()

    assert differences == []
    assert f"{SCHEMA}.credit_notes" in metadata.tables
