"""Opaque keyset cursors for "newest first" lists: the (created_at, id) of the last item of a page.

A cursor is URL-safe base64 of compact JSON ``[iso timestamp, id]``; anything else is ``BadCursor``
(answered 422 ``invalid_cursor``). The next page holds the items strictly older in (created_at, id).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime


class BadCursor(ValueError):
    code = "invalid_cursor"


def encode(created_at: datetime, item_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), item_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, item_id = json.loads(raw)
        created_at = datetime.fromisoformat(at)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise BadCursor(f"cursor {cursor[:40]!r} is not one this list gave") from None
    if created_at.tzinfo is None or not isinstance(item_id, str):
        raise BadCursor(f"cursor {cursor[:40]!r} is not one this list gave")
    return created_at, item_id
