"""Idempotent consumption: the key of each handled message is stored in the same transaction as its
effects, with the answer that was given, so a redelivery gets the same answer and no second effect.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import JSON, Column, DateTime, MetaData, String, Table, func
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_platform.db import driver_connection


def inbox_table(metadata: MetaData) -> Table:
    return Table(
        "inbox", metadata,
        Column("message_key", String(300), primary_key=True),
        Column("response", JSON, nullable=True),
        Column("handled_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    )


class Inbox:
    def __init__(self, table: Table):
        self.table = table
        # Straight on asyncpg inside the caller's transaction (issue 31 item 4): a claim and a record per command.
        self._claim_sql = (f"INSERT INTO {table.fullname} (message_key) VALUES ($1) "
                           "ON CONFLICT DO NOTHING RETURNING message_key")
        self._recorded_sql = f"SELECT response FROM {table.fullname} WHERE message_key = $1"
        self._record_sql = f"UPDATE {table.fullname} SET response = $2::json WHERE message_key = $1"

    async def claim(self, conn: AsyncConnection, key: str) -> tuple[bool, dict[str, Any] | None]:
        """Claim ``key`` inside the caller's transaction.

        Returns ``(True, None)`` the first time; ``(False, recorded_response)`` when already handled.
        Concurrent claimers of one key serialise on the primary key: the loser waits, then sees it.
        """
        raw = await driver_connection(conn)
        if await raw.fetchval(self._claim_sql, key) is not None:
            return True, None
        return False, await raw.fetchval(self._recorded_sql, key)

    async def record(self, conn: AsyncConnection, key: str, response: dict[str, Any]) -> None:
        await (await driver_connection(conn)).execute(self._record_sql, key, json.dumps(response))
