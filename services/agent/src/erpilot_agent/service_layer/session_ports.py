"""What the session use cases (``sessions``, ``expiry_warnings``, ``votes``) need from the store: the
sessions, their runs and their event streams, read and written inside the call unit of work
(``call_ports.CallUnitOfWork.sessions``), so a shown warning or vote commits with the call's row lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass
class SessionRecord:
    session_id: str
    owner: str
    title: str | None
    created_at: datetime
    last_seq: int  # the seq of the session's last event (0: none yet)
    active_run_id: str | None


@dataclass
class RunSummary:
    run_id: str
    status: str
    error: dict[str, Any] | None
    created_at: datetime


@dataclass
class StoredEvent:
    seq: int
    type: str
    data: dict[str, Any]


class SessionRepository(Protocol):
    async def get(self, session_id: str) -> SessionRecord | None: ...

    async def add(self, session_id: str, owner: str, title: str | None) -> None:
        """A new session (the caller checked there is none with this id)."""
        ...

    async def owned_by(self, owner: str, *, q: str | None, before: tuple[datetime, str] | None,
                       limit: int) -> list[SessionRecord]:
        """The owner's sessions newest first (``created_at``, then ``session_id``), older than ``before``;
        ``q`` a case-insensitive substring of the title."""
        ...

    async def runs(self, session_id: str) -> list[RunSummary]:
        """The session's runs, oldest first."""
        ...

    async def events(self, session_id: str) -> list[StoredEvent]:
        """The session's events in ``seq`` order."""
        ...

    async def shows(self, session_id: str, type_: str, **data: str) -> bool:
        """Whether the session has an event of ``type_`` whose data has all these values."""
        ...
