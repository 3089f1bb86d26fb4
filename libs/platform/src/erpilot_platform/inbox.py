"""Idempotent consumption: the key of each handled message is stored in the same transaction as its
effects, with the answer that was given, so a redelivery gets the same answer and no second effect.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Column, DateTime, MetaData, String, Table, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection


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

    async def claim(self, conn: AsyncConnection, key: str) -> tuple[bool, dict[str, Any] | None]:
        """Claim ``key`` inside the caller's transaction.

        Returns ``(True, None)`` the first time; ``(False, recorded_response)`` when already handled.
        Concurrent claimers of one key serialise on the primary key: the loser waits, then sees it.
        """
        inserted = await conn.execute(
            insert(self.table).values(message_key=key).on_conflict_do_nothing().returning(self.table.c.message_key)
        )
        if inserted.first() is not None:
            return True, None
        recorded = await conn.scalar(select(self.table.c.response).where(self.table.c.message_key == key))
        return False, recorded

    async def record(self, conn: AsyncConnection, key: str, response: dict[str, Any]) -> None:
        await conn.execute(self.table.update().where(self.table.c.message_key == key).values(response=response))
