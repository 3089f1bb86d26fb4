"""Persistence of the audit chain: appends serialised by a transaction-level advisory lock, reads in order."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy import exists, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_approval.adapters import sql
from erpilot_approval.adapters.tables import audit_checkpoints, audit_log
from erpilot_approval.domain.audit import (
    GENESIS,
    AuditRow,
    Broken,
    Checkpoint,
    chain_hash,
    event_of,
    sign,
    sign_checkpoint,
    verify,
)
from erpilot_platform import advisory_locks
from erpilot_platform.db import driver_connection

# Held from the first append to the end of the transaction: one writer extends the chain at a time, and
# it is taken after the approval rows a use case locks, so it never waits for one while holding it. Its key
# is its own: a key another service takes would stall that service's transactions (see advisory_locks).
AUDIT_LOCK_KEY = advisory_locks.APPROVAL_AUDIT
PAGE = 1000


async def _lock(conn: AsyncConnection) -> None:
    await (await driver_connection(conn)).execute(sql.AUDIT_LOCK)


async def head(conn: AsyncConnection) -> tuple[int, str]:
    row = (await conn.execute(select(audit_log.c.seq, audit_log.c.hash).order_by(audit_log.c.seq.desc())
                              .limit(1))).first()
    return (row.seq, row.hash) if row is not None else (0, GENESIS)


class Chain:
    """The audit chain as one transaction extends it: the lock is taken at the first append or checkpoint,
    and the head read then is carried on from row to row (nobody else can move it while the lock is held),
    so an append costs a read of the clock (with the ``once`` check) and the insert. One per transaction:
    a retried transaction starts a new one (a rolled-back head must not be carried over)."""

    def __init__(self, conn: AsyncConnection, key: Ed25519PrivateKey):
        self.conn, self.key = conn, key
        self._head: tuple[int, str] | None = None  # None: the lock is not held yet

    async def _locked(self) -> None:
        if self._head is None:
            await _lock(self.conn)

    async def append(self, kind: str, *, pending_id: str | None, operation_id: str | None, actor: str | None,
                     data: dict[str, Any], once: bool = False) -> bool:
        """Append one event (``once``: unless an event of this kind for this operation exists); False if skipped."""
        if once and operation_id is None:  # "= NULL" would find nothing: every append would pass as the first
            raise ValueError("an append once per operation needs the operation_id")
        await self._locked()  # its own statement: the next one's snapshot must see the head it waited for
        raw = await driver_connection(self.conn)
        before = sql.BEFORE_APPEND[self._head is None, once]
        row = await (raw.fetchrow(before, kind, operation_id) if once else raw.fetchrow(before))
        if self._head is None:
            self._head = (row["seq"], row["hash"]) if row["seq"] is not None else (0, GENESIS)
        if once and row["done"]:
            return False
        seq, prev, at = self._head[0] + 1, self._head[1], row["at"]
        event = event_of(seq, at, kind, pending_id, operation_id, actor, data)
        digest = chain_hash(prev, event)
        # ``data`` as SQLAlchemy's JSON type would send it (json.dumps): the text stored is the one hashed from.
        await raw.execute(sql.AUDIT_APPEND, seq, at, kind, pending_id, operation_id, actor, json.dumps(data), prev,
                          digest, sign(self.key, digest))
        self._head = (seq, digest)
        return True

    async def checkpoint(self) -> Checkpoint | None:
        """Sign the current head unless it is signed already (or the log is empty)."""
        await self._locked()
        if self._head is None:
            self._head = await head(self.conn)
        seq, digest = self._head
        if seq == 0 or await self.conn.scalar(select(exists().where(audit_checkpoints.c.seq == seq))):
            return None
        now = await self.conn.scalar(select(func.clock_timestamp()))
        mark = Checkpoint(seq=seq, hash=digest, signed_at=now, signature=sign_checkpoint(self.key, seq, digest))
        await self.conn.execute(audit_checkpoints.insert().values(seq=seq, hash=digest, signed_at=now,
                                                                  signature=mark.signature))
        return mark


async def checkpoint(conn: AsyncConnection, key: Ed25519PrivateKey) -> Checkpoint | None:
    """Sign the current head unless it is signed already (or the log is empty), in a transaction of its own."""
    return await Chain(conn, key).checkpoint()


def _row(row: Any) -> AuditRow:
    return AuditRow(seq=row.seq, at=row.at, kind=row.kind, pending_id=row.pending_id, operation_id=row.operation_id,
                    actor=row.actor, data=row.data, prev_hash=row.prev_hash, hash=row.hash, signature=row.signature)


async def page(conn: AsyncConnection, *, after: int = 0, since: datetime | None = None,
               limit: int = PAGE) -> list[AuditRow]:
    """At most ``limit`` rows after ``after`` (and at or after ``since``), in ``seq`` order."""
    stmt = select(audit_log).where(audit_log.c.seq > after).order_by(audit_log.c.seq).limit(limit)
    if since is not None:
        stmt = stmt.where(audit_log.c.at >= since)
    return [_row(row) for row in await conn.execute(stmt)]


async def rows(conn: AsyncConnection, *, after: int = 0, since: datetime | None = None) -> AsyncIterator[AuditRow]:
    """Every row after ``after`` (and at or after ``since``), in ``seq`` order, page by page."""
    while True:
        found = await page(conn, after=after, since=since)
        for row in found:
            yield row
        if len(found) < PAGE:
            return
        after = found[-1].seq


async def of(conn: AsyncConnection, *, pending_id: str | None = None, operation_id: str | None = None,
             since: datetime | None = None, limit: int = 1000) -> list[AuditRow]:
    """The rows about one approval or operation (and/or since a time), oldest first."""
    stmt = select(audit_log).order_by(audit_log.c.seq).limit(limit)
    if pending_id is not None:
        stmt = stmt.where(audit_log.c.pending_id == pending_id)
    if operation_id is not None:
        stmt = stmt.where(audit_log.c.operation_id == operation_id)
    if since is not None:
        stmt = stmt.where(audit_log.c.at >= since)
    return [_row(row) for row in await conn.execute(stmt)]


async def checkpoints(conn: AsyncConnection) -> list[Checkpoint]:
    result = await conn.execute(select(audit_checkpoints).order_by(audit_checkpoints.c.seq))
    return [Checkpoint(seq=r.seq, hash=r.hash, signed_at=r.signed_at, signature=r.signature) for r in result]


@dataclass(frozen=True)
class Verdict:
    broken: Broken | None
    checked: int
    head: int
    start: Checkpoint | None
    checkpoints: int


async def verify_chain(conn: AsyncConnection, key: Ed25519PublicKey, *, from_checkpoint: bool = False) -> Verdict:
    """Read the chain (from the start, or after the latest signed checkpoint) and verify it."""
    marks = await checkpoints(conn)
    start = marks[-1] if from_checkpoint and marks else None
    found = [row async for row in rows(conn, after=start.seq if start else 0)]
    broken, checked = verify(found, key, marks, start=start)
    head = found[-1].seq if found else (start.seq if start else 0)
    return Verdict(broken, checked, head, start, len(marks))
