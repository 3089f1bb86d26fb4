"""Runs and the model's history in PostgreSQL (the ``RunStore`` of ``service_layer.run_ports``).

Every write locks the session row first (the same lock ``append_event`` takes), so history positions
and event ``seq`` numbers are allocated in one order. The right to *drive* a session's run is a
session-level advisory lock held on a dedicated connection: it is released when the driver lets go,
and by PostgreSQL itself when the process dies, so a crashed driver never blocks its successor.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import DateTime, and_, exists, func, literal, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from erpilot_agent.adapters import repository
from erpilot_agent.adapters.run_rows import (
    PROGRESS,
    answered_calls,
    append_history,
    blocked,
    close_run,
    lock_active_run,
    run_record,
)
from erpilot_agent.adapters.tables import history, runs, sessions, tool_calls
from erpilot_agent.domain.history import Entry, tool_message, user_message
from erpilot_agent.domain.run_sharing import BLOCKING_RUN_STATES
from erpilot_agent.domain.runs import StoredEntry
from erpilot_agent.service_layer.run_ports import ACTIVE, RunRecord, RunRejected, RunSnapshot, ToolResult
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.subjects import AGENT_EVT_RUN_CANCELLED
from erpilot_platform import advisory_locks

LOCK_NAMESPACE = advisory_locks.AGENT_RUNS  # first key of pg_advisory_lock(int, int); the second: hashtext(session_id)
RETRY_DELAY_MAX_SECONDS = 60.0  # the longest wait between two attempts of a failing run
CANCELLED = "cancelled"  # a run its owner cancelled while it waited; it takes no further step


class SqlRunStore:
    def __init__(self, engine: AsyncEngine):
        self.engine = engine

    # --- starting a run ------------------------------------------------------------------------
    async def start_run(self, *, session_id: str, owner: str, message_id: str, text: str) -> tuple[str, bool]:
        async with self.engine.begin() as conn:
            session = await repository.get_session(conn, session_id, lock=True)
            if session is None or session.owner != owner:
                raise RunRejected(ReplyV1.failure("not_found", f"session {session_id} not found", 404))
            earlier = (await conn.execute(select(runs).where(
                runs.c.session_id == session_id, runs.c.message_id == message_id))).first()
            if earlier is not None:
                if await self._message_text(conn, session_id, earlier.run_id) != text:
                    raise RunRejected(ReplyV1.failure(
                        "idempotency_conflict", f"message {message_id} was posted with another text", 409))
                return earlier.run_id, False
            # A run waiting for a person does not block the session (SPEC §9); one actively working does.
            working = (await conn.execute(select(runs.c.run_id, runs.c.status).where(
                runs.c.session_id == session_id, runs.c.status.in_(BLOCKING_RUN_STATES))
                .order_by(runs.c.created_at.desc()).limit(1))).first()
            if working is not None:
                raise RunRejected(ReplyV1.failure(
                    "run_in_progress", "the agent is still working on the previous message", 409,
                    run_id=working.run_id, run_status=working.status))
            run_id = f"run_{uuid.uuid4().hex}"
            await conn.execute(runs.insert().values(run_id=run_id, session_id=session_id, status="running",
                                                    message_id=message_id))
            await conn.execute(update(sessions).where(sessions.c.session_id == session_id)
                               .values(active_run_id=run_id))
            await append_history(conn, session_id, run_id, [user_message(text)])
            await repository.append_events(conn, session_id, [
                ("message", {"role": "user", "text": text, "run_id": run_id}),
                ("run_started", {"run_id": run_id}),
            ])
        repository.outbox.wake()
        return run_id, True

    @staticmethod
    async def _message_text(conn: AsyncConnection, session_id: str, run_id: str) -> str | None:
        rows = (await conn.execute(select(history.c.entry).where(
            history.c.session_id == session_id, history.c.run_id == run_id).order_by(history.c.position))).scalars()
        return next((entry.get("content") for entry in rows if entry.get("role") == "user"), None)

    # --- the driver's lock -----------------------------------------------------------------------
    @asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[bool]:
        keys = {"ns": LOCK_NAMESPACE, "sid": session_id}
        async with self.engine.connect() as conn:
            held = bool(await conn.scalar(text("SELECT pg_try_advisory_lock(:ns, hashtext(:sid))"), keys))
            await conn.commit()  # a session-level lock outlives the transaction; do not sit idle in one
            try:
                yield held
            finally:
                if held:
                    try:
                        await conn.execute(text("SELECT pg_advisory_unlock(:ns, hashtext(:sid))"), keys)
                        await conn.commit()
                    except BaseException:
                        # Never return a connection that may still hold the lock to the pool.
                        await conn.invalidate()
                        raise

    # --- reading -------------------------------------------------------------------------------
    async def get_run(self, run_id: str) -> RunRecord | None:
        async with self.engine.connect() as conn:
            return await run_record(conn, run_id)

    async def load(self, run_id: str) -> RunSnapshot | None:
        async with self.engine.connect() as conn:
            record = await run_record(conn, run_id)
            if record is None:
                return None
            rows = (await conn.execute(select(history.c.run_id, history.c.entry).where(
                history.c.session_id == record.session_id).order_by(history.c.position))).all()
        return RunSnapshot(record, [StoredEntry(row.run_id, row.entry) for row in rows])

    async def resumable(self, run_id: str) -> bool:
        async with self.engine.connect() as conn:
            found = await conn.scalar(select(runs.c.run_id).where(
                runs.c.run_id == run_id, runs.c.status == "waiting", ~blocked(runs.c.run_id)))
        return found is not None

    async def has_running_runs(self) -> bool:
        async with self.engine.connect() as conn:
            return bool(await conn.scalar(select(exists().where(runs.c.status == "running"))))

    async def runs_to_resume(self, *, stale_seconds: float) -> list[str]:
        now = repository.now()
        cutoff = now - timedelta(seconds=stale_seconds)
        # After failed attempts, wait stale_seconds * 2^(attempts - 1), at most RETRY_DELAY_MAX_SECONDS.
        since_last = func.extract("epoch", literal(now, DateTime(timezone=True)) - runs.c.updated_at)
        delay = func.least(stale_seconds * func.power(2, func.greatest(runs.c.failed_attempts - 1, 0)),
                           RETRY_DELAY_MAX_SECONDS)
        due = (runs.c.failed_attempts == 0) | (since_last >= delay)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(runs.c.run_id).where(
                (and_(runs.c.status == "running", runs.c.updated_at < cutoff, due))
                | (and_(runs.c.status == "waiting", ~blocked(runs.c.run_id), due))
            ).order_by(runs.c.updated_at).limit(100))).scalars().all()
        return list(rows)

    async def run_of_call(self, call_key: str) -> str | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(tool_calls.c.run_id, tool_calls.c.source).where(
                tool_calls.c.call_key == call_key))).first()
        return row.run_id if row is not None and row.source == "model" else None

    # --- cancelling --------------------------------------------------------------------------
    async def cancel(self, *, session_id: str, owner: str, run_id: str) -> list[str]:
        async with self.engine.begin() as conn:
            session = await repository.get_session(conn, session_id, lock=True)
            run = (await conn.execute(select(runs).where(runs.c.run_id == run_id,
                                                         runs.c.session_id == session_id))).first()
            if session is None or session.owner != owner or run is None:
                raise RunRejected(ReplyV1.failure("not_found", f"run {run_id} not found", 404))
            if run.status == "running":
                raise RunRejected(ReplyV1.failure(
                    "run_in_progress", "the run is working, not waiting for a decision", 409, run_status=run.status))
            if run.status not in ("waiting", CANCELLED):
                raise RunRejected(ReplyV1.failure(
                    "run_not_waiting", f"the run is {run.status}; only a waiting run can be cancelled", 409,
                    run_status=run.status))
            awaiting = (await conn.execute(select(tool_calls.c.call_id, tool_calls.c.pending_id).where(
                tool_calls.c.run_id == run_id, tool_calls.c.session_id == session_id,
                tool_calls.c.status == "awaiting_approval", tool_calls.c.pending_id.is_not(None))
                .order_by(tool_calls.c.created_at))).all()
            if run.status == "waiting":
                error = {"code": "cancelled", "message": "cancelled by its owner"}
                await close_run(conn, session_id, run_id, CANCELLED, error)
                await repository.append_event(conn, session_id, "run_failed", {"run_id": run_id, "error": error})
                # The withdrawal follows from this record, whoever asked and whatever crashes after.
                cancelled = RunCancelledV1(session_id=session_id, run_id=run_id, owner=owner,
                                           call_ids=[row.call_id for row in awaiting], cancelled_at=repository.now())
                await repository.outbox.add(conn, AGENT_EVT_RUN_CANCELLED, cancelled, msg_id=f"run_cancelled:{run_id}")
        repository.outbox.wake()
        return [row.pending_id for row in awaiting]

    # --- writing -------------------------------------------------------------------------------
    async def record_reply(self, run_id: str, entry: Entry) -> None:
        final = not entry.get("tool_calls")
        async with self.engine.begin() as conn:
            run = await lock_active_run(conn, run_id)
            if run is None:
                return
            await append_history(conn, run.session_id, run_id, [entry])
            events: list[tuple[str, dict[str, Any]]] = []
            if (entry.get("content") or "").strip():
                events.append(("message", {"role": "assistant", "text": entry["content"], "run_id": run_id}))
            await conn.execute(update(runs).where(runs.c.run_id == run_id).values(
                steps=runs.c.steps + 1, status="running", updated_at=repository.now(), **PROGRESS))
            if final:
                events.append(("run_finished", {"run_id": run_id}))
                await close_run(conn, run.session_id, run_id, "finished", None)
            await repository.append_events(conn, run.session_id, events)
        repository.outbox.wake()

    async def record_results(self, run_id: str, results: list[ToolResult], *, waiting: bool) -> None:
        async with self.engine.begin() as conn:
            run = await lock_active_run(conn, run_id)
            if run is None:
                return
            answered = await answered_calls(conn, run.session_id)  # a result is stored once, whoever got here first
            fresh = [result for result in results if result.call_id not in answered]
            await append_history(conn, run.session_id, run_id,
                                  [tool_message(result.call_id, result.content) for result in fresh])
            events: list[tuple[str, dict[str, Any]]] = []
            for result in fresh:
                if result.rejected is not None:
                    tool, arguments = result.rejected
                    outcome = "not_executed" if result.content.get("status") == "not_executed" else "failed"
                    error = result.content.get("error") or {"code": result.content.get("reason"),
                                                            "message": result.content.get("message")}
                    events += [
                        ("tool_started", {"call_id": result.call_id, "tool": tool, "arguments": arguments}),
                        ("tool_finished", {"call_id": result.call_id, "outcome": outcome,
                                           "error": {"code": error.get("code"), "message": error.get("message")}}),
                    ]
            await repository.append_events(conn, run.session_id, events)
            await conn.execute(update(runs).where(runs.c.run_id == run_id).values(
                status="waiting" if waiting else "running", updated_at=repository.now(),
                **(PROGRESS if fresh else {})))
        repository.outbox.wake()

    async def finish(self, run_id: str) -> None:
        await self._end(run_id, "finished", None)

    async def fail(self, run_id: str, code: str, message: str) -> None:
        await self._end(run_id, "failed", {"code": code, "message": message})

    async def _end(self, run_id: str, status: str, error: dict[str, str] | None) -> None:
        async with self.engine.begin() as conn:
            run = await lock_active_run(conn, run_id)
            if run is None:
                return
            await close_run(conn, run.session_id, run_id, status, error)
            data: dict[str, Any] = {"run_id": run_id}
            if error is not None:
                data["error"] = error
            await repository.append_event(conn, run.session_id, "run_finished" if error is None else "run_failed",
                                          data)
        repository.outbox.wake()

    async def note_failure(self, run_id: str) -> tuple[int, float]:
        now = repository.now()
        async with self.engine.begin() as conn:
            row = (await conn.execute(
                update(runs).where(runs.c.run_id == run_id, runs.c.status.in_(ACTIVE))
                .values(failed_attempts=runs.c.failed_attempts + 1,
                        failing_since=func.coalesce(runs.c.failing_since, now), updated_at=now)
                .returning(runs.c.failed_attempts, runs.c.failing_since))).first()
        if row is None:
            return 0, 0.0
        return row.failed_attempts, (now - row.failing_since).total_seconds()
