"""Times asked about in a query string (``?since=``), checked once for every route that takes one.

FastAPI parses ISO 8601; what is left is a zone (422 ``invalid_since`` without one: "since 08:00" where?) and a
moment UTC can hold (422 ``invalid_datetime``, SPEC §11: ``9999-12-31T23:59:59-01:00`` is in the year 10000 in
UTC, and reached the database as a 500). Cursors carry their own time: ``erpilot_platform.cursors`` checks it
the same way where a list is read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Depends

from erpilot_gateway.problems import Problem
from erpilot_platform import cursors


def since_query(since: datetime | None = None) -> datetime | None:
    """``since``, in UTC: ISO 8601 with a zone, e.g. ``2026-12-01T08:00:00Z``."""
    if since is None:
        return None
    if since.tzinfo is None:
        raise Problem(422, "invalid_since", "since needs a time zone, e.g. 2026-12-01T08:00:00Z")
    try:
        return cursors.utc(since, "since")
    except cursors.BadDatetime as exc:
        raise Problem(422, exc.code, str(exc)) from None


Since = Annotated[datetime | None, Depends(since_query)]
