"""``erpilot audit verify|export``: check the approval service's audit chain, or write it out as JSON lines.

Reads the ``approval`` schema at ``ERPILOT_DATABASE_URL`` (read access is enough) and checks signatures with
``ERPILOT_GRANT_VERIFY_KEY`` (base64 Ed25519), else the development copy of the grant pair's public key under
``ERPILOT_DATA_DIR`` (the ERP's, ``keys/erp/``: ``erpilot_platform.dev_keys``).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import TextIO

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from erpilot_approval.adapters import audit_log
from erpilot_platform.db import create_engine


def verify_key(data_dir: Path) -> Ed25519PublicKey:
    from erpilot_platform import dev_keys
    from erpilot_platform.grants import load_verify_key

    given = os.environ.get("ERPILOT_GRANT_VERIFY_KEY")
    return load_verify_key(given) if given else dev_keys.verify_key(data_dir, "grant", "erp")


async def verify(database_url: str, key: Ed25519PublicKey, *, from_checkpoint: bool = False) -> tuple[bool, str]:
    """(intact, what to print): the first broken link (row and reason), or how much was checked."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            verdict = await audit_log.verify_chain(conn, key, from_checkpoint=from_checkpoint)
    finally:
        await engine.dispose()
    origin = f"checkpoint {verdict.start.seq}" if verdict.start else "the start"
    if verdict.broken is not None:
        return False, (f"audit log BROKEN at row {verdict.broken.seq}: {verdict.broken.reason} "
                       f"({verdict.checked} rows checked from {origin})")
    return True, (f"audit log intact: {verdict.checked} rows checked from {origin} to row {verdict.head}, "
                  f"{verdict.checkpoints} signed checkpoints")


async def export(database_url: str, out: TextIO, *, since: datetime | None = None) -> int:
    """Every row (at or after ``since``) as one JSON line each, in ``seq`` order; returns how many."""
    engine = create_engine(database_url, pool_size=1)
    count = 0
    try:
        async with engine.connect() as conn:
            async for row in audit_log.rows(conn, since=since):
                out.write(json.dumps(row.to_wire(), ensure_ascii=False, sort_keys=True) + "\n")
                count += 1
    finally:
        await engine.dispose()
    return count
