"""Alembic, one history and one schema per service.

Each service keeps its own ``migrations/`` folder whose ``env.py`` calls ``run_env``; ``upgrade``
runs a service's history programmatically (used by ``erpilot migrate`` and the tests). A PostgreSQL
advisory lock serialises concurrent migrators so several replicas may start at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command, context
from alembic.config import Config
from sqlalchemy import MetaData, pool, text
from sqlalchemy.ext.asyncio import create_async_engine

from erpilot_platform import advisory_locks
from erpilot_platform.db import sqlalchemy_url

MIGRATION_LOCK_KEY = advisory_locks.MIGRATIONS


def alembic_config(script_location: Path, database_url: str, schema: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    cfg.attributes["erpilot_schema"] = schema
    return cfg


def autogenerate(script_location: Path, database_url: str, schema: str, message: str, rev_id: str) -> None:
    """Write a new revision by comparing the service's tables with the database (developer tool)."""
    command.revision(alembic_config(script_location, database_url, schema), message=message,
                     autogenerate=True, rev_id=rev_id)


def upgrade(script_location: Path, database_url: str, schema: str, revision: str = "head") -> None:
    """Bring ``schema`` up to ``revision`` (blocking; call from a thread inside an event loop)."""
    command.upgrade(alembic_config(script_location, database_url, schema), revision)


def run_env(target_metadata: MetaData) -> None:
    """The body of every service's ``migrations/env.py``: online, async, inside its own schema."""
    cfg = context.config
    schema = cfg.attributes["erpilot_schema"]

    def do_run(connection) -> None:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            version_table_schema=schema,
            include_schemas=True,
            # Autogenerate must only ever look at this service's own schema.
            include_name=lambda name, type_, _parents: type_ != "schema" or name == schema,
        )
        with context.begin_transaction():
            context.run_migrations()

    async def run_async() -> None:
        engine = create_async_engine(cfg.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
        async with engine.connect() as connection:
            await connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            await connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
            await connection.commit()
            try:
                await connection.run_sync(do_run)
                await connection.commit()
            finally:
                await connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
                await connection.commit()
        await engine.dispose()

    asyncio.run(run_async())
