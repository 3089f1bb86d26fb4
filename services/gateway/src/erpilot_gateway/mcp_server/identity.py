"""Which Erpilot session and which ``call_id`` an MCP request maps to (no I/O).

An MCP session maps to one Erpilot session owned by the token's subject: the client may name one it
owns (``_meta["erpilot.dev/session-id"]``); otherwise the id is derived from the subject and the MCP
connection (the ``Mcp-Session-Id`` of a Streamable HTTP session, the process of a stdio server, or,
for 2026-07-28 requests that carry no session, the bearer token itself), so every request of that
connection lands in the same session and nobody else's does.

The JSON-RPC ``id`` of a request never becomes a ``call_id``: ids repeat across connections and
clients reuse them freely. A retry is recognised by ``_meta["erpilot.dev/idempotency-key"]`` alone,
which is turned into a ``call_id`` stable within the session, so the agent answers a retried call
with the stored answer (another body under the same key: ``idempotency_conflict``).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from typing import Any

SESSION_META = "erpilot.dev/session-id"
IDEMPOTENCY_META = "erpilot.dev/idempotency-key"
_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class InvalidMeta(ValueError):
    """A ``_meta`` member Erpilot reads is malformed."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def derived_session_id(subject: str, connection_key: str) -> str:
    """The session of one MCP connection of one subject (the same on every request of it)."""
    return f"ses_mcp_{_digest('erpilot-mcp-session', subject, connection_key)[:24]}"


def named_session_id(meta: Mapping[str, Any] | None) -> str | None:
    """The session the client names in ``_meta``, if any."""
    value = (meta or {}).get(SESSION_META)
    if value is None:
        return None
    if not isinstance(value, str) or not _SESSION_ID.fullmatch(value):
        raise InvalidMeta("invalid_session_id", f"_meta {SESSION_META} must be 1-64 of A-Z a-z 0-9 _ . : -")
    return value


def call_id_for(session_id: str, meta: Mapping[str, Any] | None) -> str:
    """A ``call_id`` from the idempotency key (stable per session), else a fresh one."""
    key = (meta or {}).get(IDEMPOTENCY_META)
    if key is None:
        return f"mcp_{uuid.uuid4().hex}"
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise InvalidMeta("invalid_idempotency_key", f"_meta {IDEMPOTENCY_META} must be 1-100 of A-Z a-z 0-9 _ . : -")
    return f"mcp_{_digest('erpilot-mcp-call', session_id, key)[:32]}"
