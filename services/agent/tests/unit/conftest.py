"""The agent's use cases on its memory unit of work (``tests/fakes.py``) and a fake of the ERP and the approval
service's policy: no broker, no database."""

from __future__ import annotations

import pytest

from erpilot_agent.service_layer.tool_calls import ToolCallService

from ..fakes import FakeDownstream
from ..memory_agent import MemoryAgent

SESSION, OWNER = "ses_1", "alice"
PUBLIC_URL = "https://erpilot.test/"


@pytest.fixture
def uow() -> MemoryAgent:
    return MemoryAgent({SESSION: OWNER})


@pytest.fixture
def downstream() -> FakeDownstream:
    return FakeDownstream()


@pytest.fixture
def finished() -> list[str]:
    return []


@pytest.fixture
def service(uow, downstream, finished) -> ToolCallService:
    async def on_finished(call_key: str) -> None:
        finished.append(call_key)

    return ToolCallService(uow, downstream, public_url=PUBLIC_URL, on_finished=on_finished)
