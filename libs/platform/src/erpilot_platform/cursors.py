"""Opaque keyset cursors for "newest first" lists: the (created_at, id) of the last item of a page.

A cursor is URL-safe base64 of compact JSON ``[iso timestamp, id]``; anything else is ``BadCursor``
(answered 422 ``invalid_cursor``). The next page holds the items strictly older in (created_at, id).

Every time a list is asked about (a cursor's, a ``since``) goes through ``utc``: one with a zone may still lie
outside what UTC can hold (``0001-01-01T00:00:00+01:00``, ``9999-12-31T23:59:59-01:00``), which would reach the
database or a comparison as an OverflowError (a 500). It is 422 ``invalid_datetime`` instead (SPEC §11).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime


class BadCursor(ValueError):
    code = "invalid_cursor"


class BadDatetime(BadCursor):
    """A time with a zone that does not convert to UTC (a cursor's, or a query's)."""

    code = "invalid_datetime"


def utc(moment: datetime, what: str = "time") -> datetime:
    """``moment`` (with a zone) in UTC; ``BadDatetime`` when UTC cannot hold it (beyond the years 1 to 9999)."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise BadDatetime(f"{what} {moment.isoformat()} does not convert to UTC (years 1 to 9999)") from None


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
    return utc(created_at, "the cursor's time"), item_id
