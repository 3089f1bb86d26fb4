"""The agent's ``Work`` on PostgreSQL (``service_layer.ports.Work``): the platform's ``Transaction`` with the
calls, sessions and runs repositories bound to its connection. ``app.build`` gives it to
``erpilot_platform.uow.UnitOfWork`` as its ``bind``, with the agent's own outbox."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from erpilot_agent.adapters.sql_calls import LockedSeqs, SqlCallRepository, SqlSessionRepository
from erpilot_agent.adapters.sql_runs import SqlRunRepository
from erpilot_platform.uow import Transaction


class SqlWork:
    def __init__(self, tx: Transaction):
        self.tx = tx
        locked_seqs: LockedSeqs = {}  # shared: a session locked through a call numbers the run's events too
        self.calls = SqlCallRepository(tx, locked_seqs)
        self.sessions = SqlSessionRepository(tx, locked_seqs)
        self.runs = SqlRunRepository(tx)

    async def emit(self, subject: str, payload: BaseModel | dict[str, Any], msg_id: str | None = None) -> None:
        await self.tx.emit(subject, payload, msg_id=msg_id)
