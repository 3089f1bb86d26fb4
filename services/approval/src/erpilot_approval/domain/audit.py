"""The tamper-evident audit log's rules: a hash chain of events, each row signed, with signed checkpoints.

The chain's format is shared with its verifiers (``erpilot audit verify``), so it lives in
``erpilot_platform.audit_chain``; the approval service writes it through these names.
"""

from __future__ import annotations

from erpilot_platform.audit_chain import (
    GENESIS,
    KINDS,
    AuditRow,
    Broken,
    Checkpoint,
    chain_hash,
    checkpoint_payload,
    event_of,
    sign,
    sign_checkpoint,
    verify,
)

__all__ = ["GENESIS", "KINDS", "AuditRow", "Broken", "Checkpoint", "chain_hash", "checkpoint_payload", "event_of",
           "sign", "sign_checkpoint", "verify"]
