"""The identity of a tool call (plain functions, no I/O).

A ``call_id`` is chosen before the command is first published (by the gateway, the client, or the model
run) and is unique only *within its session*: the same id in another session is another call. The
agent keys every row, lock and transition on a ``call_key`` derived from both, and derives the call's
``operation_id`` (the ERP's and the approval service's idempotency key) from that key, so a redelivered
or duplicated command finds the same call and asks for the same operation, whichever replica handles it.
"""

from __future__ import annotations

import hashlib


def call_key(session_id: str, call_id: str) -> str:
    """The globally unique internal key of the call ``call_id`` of ``session_id``.

    The session id is length-prefixed, so no choice of ids makes two different pairs meet.
    """
    material = f"{len(session_id)}:{session_id}:{call_id}"
    return "tc_" + hashlib.sha256(material.encode()).hexdigest()[:40]


def operation_id_for(key: str) -> str:
    """The operation id of a call's first version (an edit's new version gets its own, from the approval)."""
    return "op_" + hashlib.sha256(f"call:{key}".encode()).hexdigest()[:32]
