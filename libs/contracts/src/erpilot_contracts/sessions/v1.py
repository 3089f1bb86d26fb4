"""The session event of SPEC §4, stored by the agent and published live (core NATS) on
``erpilot.v1.sessions.<session_id>.events``; the query that replays a session's stored events."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

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


class GetSessionEventsV1(Message):
    """The owner's stored events of a session after ``after_seq``, oldest first: the replay of the SSE stream
    (the live ones come on core NATS, which may drop one; the store has them all, SPEC §11)."""

    session_id: str
    owner: str
    after_seq: int = Field(0, ge=0, description="The last seq the reader has; 0: from the first event.")
    limit: int = Field(200, ge=1, le=500)


class SessionEventPageV1(Message):
    """The answer to ``query.agent.events``: events in ``seq`` order, at most ``limit`` of them and as many as fit
    one NATS message (a draft's events carry its whole revision)."""

    events: list[SessionEventV1]
    more: bool = Field(False, description="More events are stored after the last one: ask again after its seq.")
