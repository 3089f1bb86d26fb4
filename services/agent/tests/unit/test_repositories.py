"""The repository cases (``repository_cases``) on the memory ``Work`` the unit tests use (``memory_agent.py``); the
same cases run on PostgreSQL in tests/integration/test_repositories.py."""

from __future__ import annotations

import pytest

from ..memory_agent import MemoryAgent, MemoryDriverLocks
from ..repository_cases import *  # noqa: F403 (the shared cases)
from ..repository_cases import Backend

pytestmark = pytest.mark.unit


@pytest.fixture
def repos() -> Backend:
    uow = MemoryAgent()

    async def outbox(session_id: str) -> list:
        prefix = f"session:{session_id}:"
        return [(m.msg_id, m.payload) for m in uow.sent if (m.msg_id or "").startswith(prefix)]

    return Backend(uow, outbox, lambda: uow.advance(1), MemoryDriverLocks())
