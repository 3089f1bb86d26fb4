"""``erpilot audit verify|export``: check the approval service's audit chain, or write it out as JSON lines.

Asks the approval service (``query.approval.audit_chain`` at ``ERPILOT_NATS_URL``; on a NATS with users, as the
admin user: ``ERPILOT_NATS_USER`` / ``ERPILOT_NATS_PASSWORD``, or the password `erpilot up --secure` keeps in the
data dir) and takes nothing on its word: every row and checkpoint is verified here with the public key alone,
``ERPILOT_GRANT_VERIFY_KEY`` (base64 Ed25519), else the development copy of the grant pair's public key under
``ERPILOT_DATA_DIR`` (the ERP's, ``keys/erp/``: ``erpilot_platform.dev_keys``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TextIO

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from faststream.nats import NatsBroker

from erpilot_contracts import requests
from erpilot_contracts.approval.v1 import AuditChainPageV1, AuditChainQueryV1
from erpilot_platform import audit_chain
from erpilot_platform.audit_chain import AuditRow, Checkpoint
from erpilot_platform.broker import call, create_broker

CONNECT_SECONDS = 15.0
# How the chain is read: one page of ``query.approval.audit_chain`` (``approval_service`` asks it over NATS).
Ask = Callable[[AuditChainQueryV1], Awaitable[AuditChainPageV1]]


def verify_key(data_dir: Path) -> Ed25519PublicKey:
    from erpilot_platform import dev_keys
    from erpilot_platform.grants import load_verify_key

    given = os.environ.get("ERPILOT_GRANT_VERIFY_KEY")
    return load_verify_key(given) if given else dev_keys.verify_key(data_dir, "grant", "erp")


def nats_login(data_dir: Path) -> tuple[str | None, str | None]:
    """(user, password): ``ERPILOT_NATS_USER`` (none on an open NATS) with ``ERPILOT_NATS_PASSWORD``, else the
    password `erpilot up --secure` wrote for that user in the data dir."""
    from erpilot.stack.nats_credentials import PASSWORDS_FILE

    user = os.environ.get("ERPILOT_NATS_USER") or None
    password = os.environ.get("ERPILOT_NATS_PASSWORD")
    if user is not None and password is None and (data_dir / PASSWORDS_FILE).exists():
        password = json.loads((data_dir / PASSWORDS_FILE).read_text()).get(user)
    return user, password


@asynccontextmanager
async def approval_service(nats_url: str, *, user: str | None = None, password: str | None = None
                           ) -> AsyncIterator[Ask]:
    """The approval service's answer to a page of the chain, over NATS as the operations user."""
    broker: NatsBroker = create_broker(nats_url, "admin", user=user, password=password)
    try:
        await asyncio.wait_for(broker.connect(), CONNECT_SECONDS)
        yield lambda query: call(broker, requests.APPROVAL_AUDIT_CHAIN, query)
    finally:
        await broker.stop()


def _checkpoints(page: AuditChainPageV1) -> list[Checkpoint]:
    return [Checkpoint(seq=m.seq, hash=m.hash, signed_at=m.signed_at, signature=m.signature) for m in page.checkpoints]


async def checkpoints(ask: Ask) -> list[Checkpoint]:
    """The signed checkpoints, in ``seq`` order."""
    return _checkpoints(await ask(AuditChainQueryV1(limit=1, with_checkpoints=True)))


async def read_chain(ask: Ask, *, after_seq: int = 0, since: datetime | None = None,
                     ) -> tuple[list[AuditRow], list[Checkpoint]]:
    """Every row after ``after_seq`` (and at or after ``since``) in ``seq`` order, and the checkpoints signed when
    the first page was read (so each names a row that existed then), as the approval service answers them."""
    rows: list[AuditRow] = []
    marks: list[Checkpoint] | None = None
    while True:
        page = await ask(AuditChainQueryV1(after_seq=after_seq, since=since, with_checkpoints=marks is None))
        if marks is None:
            marks = _checkpoints(page)
        rows += [AuditRow(**item.model_dump(exclude={"schema_version"})) for item in page.items]
        if page.next_after_seq is None:
            return rows, marks
        after_seq = page.next_after_seq


async def verify_chain(ask: Ask, key: Ed25519PublicKey, *, from_checkpoint: bool = False
                       ) -> tuple[bool, str]:
    """(intact, what to print): the first broken link (row and reason), or how much was checked."""
    marks = await checkpoints(ask) if from_checkpoint else []
    start = marks[-1] if marks else None
    found, marks = await read_chain(ask, after_seq=start.seq if start else 0)
    broken, checked = audit_chain.verify(found, key, marks, start=start)
    head = found[-1].seq if found else (start.seq if start else 0)
    origin = f"checkpoint {start.seq}" if start else "the start"
    if broken is not None:
        return False, f"audit log BROKEN at row {broken.seq}: {broken.reason} ({checked} rows checked from {origin})"
    return True, (f"audit log intact: {checked} rows checked from {origin} to row {head}, "
                  f"{len(marks)} signed checkpoints")


async def export_chain(ask: Ask, out: TextIO, *, since: datetime | None = None) -> int:
    """Every row (at or after ``since``) as one JSON line each, in ``seq`` order; returns how many."""
    found, _ = await read_chain(ask, since=since)
    for row in found:
        out.write(json.dumps(row.to_wire(), ensure_ascii=False, sort_keys=True) + "\n")
    return len(found)


async def verify(nats_url: str, key: Ed25519PublicKey, *, from_checkpoint: bool = False,
                 login: tuple[str | None, str | None] = (None, None)) -> tuple[bool, str]:
    async with approval_service(nats_url, user=login[0], password=login[1]) as ask:
        return await verify_chain(ask, key, from_checkpoint=from_checkpoint)


async def export(nats_url: str, out: TextIO, *, since: datetime | None = None,
                 login: tuple[str | None, str | None] = (None, None)) -> int:
    async with approval_service(nats_url, user=login[0], password=login[1]) as ask:
        return await export_chain(ask, out, since=since)
