"""The session view's bound on tool results (plain Python, no I/O).

``GET /v1/sessions/{sid}`` lists every call of the session. A result whose compact JSON (UTF-8, no
spaces, as ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``) is over
``VIEW_RESULT_BYTES`` is replaced there by a marker that says so and where to read it in full:
``{"omitted": true, "reason": "result_too_large", "size_bytes", "limit_bytes", "href"}``, ``href``
being the call's ``GET /v1/sessions/{sid}/tool-calls/{call_id}``. A draft's revision grows with its
lines, and each draft tool returns one, so without the bound the view of a long draft's session
grows with the square of its length.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

VIEW_RESULT_BYTES = 16 * 1024


def result_size(result: Any) -> int:
    """UTF-8 bytes of ``result`` as compact JSON."""
    return len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def fitting(sizes: list[int], limit: int) -> int:
    """How many of the first items, of these sizes, fit ``limit`` bytes together; always at least one (each
    session event went out alone as one NATS message, so one always fits a reply)."""
    total = 0
    for count, size in enumerate(sizes):
        total += size
        if total > limit and count > 0:
            return count
    return len(sizes)


def tool_call_href(session_id: str, call_id: str) -> str:
    return f"/v1/sessions/{quote(session_id, safe='')}/tool-calls/{quote(call_id, safe=':')}"


def bounded_result(result: dict[str, Any] | None, *, session_id: str, call_id: str,
                   limit: int = VIEW_RESULT_BYTES) -> dict[str, Any] | None:
    """``result`` itself when it is at most ``limit`` bytes, else the omitted marker."""
    if result is None:
        return None
    size = result_size(result)
    if size <= limit:
        return result
    return {"omitted": True, "reason": "result_too_large", "size_bytes": size, "limit_bytes": limit,
            "href": tool_call_href(session_id, call_id)}
