"""What a service's migrations built that its code does not use, or the reverse: Alembic's comparison of the
migrated schema with the service's SQLAlchemy metadata, limited to the service's own schema."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData


def schema_differences(sync_conn: Any, metadata: MetaData, schema: str) -> list:
    """The differences between the database's ``schema`` and ``metadata`` (``[]`` when the migrations built exactly
    the tables the code uses); run it with ``await conn.run_sync(lambda c: schema_differences(c, ...))``."""
    context = MigrationContext.configure(sync_conn, opts={
        "include_schemas": True, "version_table_schema": schema,
        "include_name": lambda name, type_, parent: type_ != "schema" or name == schema,
        "include_object": lambda obj, name, type_, reflected, compare_to: not (
            type_ == "table" and name == "alembic_version")})
    return compare_metadata(context, metadata)
