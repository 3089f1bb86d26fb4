"""One PostgreSQL login role per service, with rights on its own schema only (docs/OPERATIONS.md, "Security").

``erpilot migrate`` runs as the database owner: it migrates every schema, then creates (or updates) the
roles ``erpilot_gateway``, ``erpilot_agent``, ``erpilot_approval`` and ``erpilot_erp``. Each may read
and write the tables and sequences of its own schema and nothing else (the gateway owns no schema and
may only connect); none may create objects, change its schema's Alembic version, or touch another
service's tables. Services then connect as their role, so a compromised agent that tries to write
``erp`` or ``approval`` tables is refused by PostgreSQL itself.

Passwords: ``ERPILOT_DB_<SERVICE>_PASSWORD`` at migrate time sets (or rotates) the role's password; a
role without one can log in only where the server trusts connections (not the embedded PostgreSQL, which
asks every connection for its password: ``erpilot up`` gives each role a fresh one at every start).
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Mapping
from urllib.parse import quote, urlsplit, urlunsplit

SCHEMAS = {"gateway": None, "agent": "agent", "approval": "approval", "erp": "erp"}
ROLES = {service: f"erpilot_{service}" for service in SCHEMAS}
APPEND_ONLY = {"approval": ("audit_log", "audit_checkpoints")}


def password_variable(service: str) -> str:
    return f"ERPILOT_DB_{service.upper()}_PASSWORD"


def passwords_from_env() -> dict[str, str | None]:
    """Each role's password from ``ERPILOT_DB_<SERVICE>_PASSWORD`` (None where unset)."""
    return {service: os.environ.get(password_variable(service)) or None for service in SCHEMAS}


def passwords_or_new() -> dict[str, str]:
    """Each role's password from the environment, else a fresh random one (set again on every start)."""
    return {service: given or secrets.token_urlsafe(24) for service, given in passwords_from_env().items()}


def role_url(owner_url: str, service: str, password: str | None) -> str:
    """``owner_url`` with the service's role (and password) as its user; host, database and query kept."""
    parts = urlsplit(owner_url)
    host = parts.netloc.rpartition("@")[2]
    user = quote(ROLES[service], safe="") + (f":{quote(password, safe='')}" if password else "")
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def role_envs(owner_url: str, passwords: Mapping[str, str | None]) -> dict[str, dict[str, str]]:
    """Per-service ``ERPILOT_DATABASE_URL`` for a stack whose services connect as their own roles."""
    return {service: {"ERPILOT_DATABASE_URL": role_url(owner_url, service, passwords.get(service))}
            for service in SCHEMAS}


def _statements(database: str, service: str, password: str | None) -> list[tuple[str, tuple]]:
    role, schema = ROLES[service], SCHEMAS[service]
    sql: list[tuple[str, tuple]] = [
        # CREATE ROLE has no IF NOT EXISTS; two migrators at once must both succeed.
        (f"DO $$ BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$", ()),
        (f"ALTER ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS", ()),
        (f'GRANT CONNECT ON DATABASE "{database}" TO {role}', ()),
    ]
    if password:
        sql.append(("SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)", (role, password)))
    for other in filter(None, SCHEMAS.values()):
        if other != schema:  # rights given by mistake earlier are taken back
            sql.append((f"REVOKE ALL ON ALL TABLES IN SCHEMA {other} FROM {role}", ()))
            sql.append((f"REVOKE ALL ON SCHEMA {other} FROM {role}", ()))
    if schema is not None:
        sql += [
            (f"GRANT USAGE ON SCHEMA {schema} TO {role}", ()),
            (f"REVOKE CREATE ON SCHEMA {schema} FROM {role}", ()),
            (f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}", ()),
            (f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}", ()),
            (f"REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON {schema}.alembic_version FROM {role}", ()),
        ]
        # Append-only tables: rows are inserted and read, never changed or removed (the audit log).
        sql += [(f"REVOKE UPDATE, DELETE, TRUNCATE ON {schema}.{table} FROM {role}", ())
                for table in APPEND_ONLY.get(service, ())]
    return sql


async def _provision(owner_url: str, passwords: Mapping[str, str | None]) -> None:
    import asyncpg

    conn = await asyncpg.connect(owner_url)
    try:
        database = await conn.fetchval("SELECT current_database()")
        async with conn.transaction():
            await conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            for service in SCHEMAS:
                for statement, args in _statements(database, service, passwords.get(service)):
                    if args:  # a password: quoted by the server (format %L), never by string pasting here
                        await conn.execute(await conn.fetchval(statement, *args))
                    else:
                        await conn.execute(statement)
    finally:
        await conn.close()


def provision(owner_url: str, passwords: Mapping[str, str | None]) -> None:
    """Create or update every service role and its grants (run as the owner, after the migrations)."""
    from erpilot_platform.db import sqlalchemy_url

    plain = sqlalchemy_url(owner_url).replace("postgresql+asyncpg://", "postgresql://", 1)
    asyncio.run(_provision(plain, passwords))
