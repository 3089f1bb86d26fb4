"""The session event of SPEC §4, published on ``erpilot.v1.sessions.<session_id>.events``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from erpilot_contracts.base import Message

SessionEventType = Literal[
    "message", "run_started", "run_finished", "run_failed",
    "tool_started", "approval_pending", "approval_resolved", "approval_withdrawn", "tool_executing", "tool_finished",
    "approval_expiring", "approval_vote", "approval_escalated",
]


class SessionEventV1(Message):
    seq: int
    type: SessionEventType
    session_id: str
    occurred_at: datetime
    data: dict[str, Any]
