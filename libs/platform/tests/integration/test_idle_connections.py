"""Pooled connections that idle are given back (issue 31 item 5): PostgreSQL closes a connection idle
``IDLE_SESSION_SECONDS`` (``idle_session_timeout``), and the pool's next checkout replaces it with no error for its
user; the connections a burst opened no longer stay, each a backend of its own."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from erpilot_platform import db

pytestmark = pytest.mark.integration


async def test_a_connection_idle_past_the_timeout_is_closed_by_the_server_and_replaced_at_checkout(
        database_url, monkeypatch):
    monkeypatch.setattr(db, "IDLE_SESSION_SECONDS", 1)
    engine = db.create_engine(database_url, pool_size=4, application_name="erpilot-idle-test")
    try:
        async def backend() -> int:
            async with engine.connect() as conn:
                await asyncio.sleep(0.2)  # held a while, so the burst needs connections of its own
                return await conn.scalar(text("SELECT pg_backend_pid()"))

        burst = set(await asyncio.gather(*(backend() for _ in range(4))))
        assert len(burst) == 4
        await asyncio.sleep(2.5)  # idle past the timeout: the server closed them all

        async with engine.connect() as conn:  # the checkout replaces the closed one; its user sees nothing
            assert await conn.scalar(text("SELECT current_setting('idle_session_timeout')")) == "1s"
            live = set(await conn.scalars(text(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'erpilot-idle-test'")))
        assert not burst & live  # the burst's backends are gone ...
        assert len(live) == 1  # ... and only the one in use was opened again
    finally:
        await engine.dispose()
