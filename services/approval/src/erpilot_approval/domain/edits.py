"""Edits (SPEC §3.3): new arguments make a new pending version of the same call, the old one ends
``superseded``. An edit passes the checks of an approval; the new version records every editor so
separation of duties keeps every one of them from approving it. Pure functions, no I/O.

An edit re-prepares through the ledger (issue 25, one orchestrator): the approval service records an
``EditIntent`` and asks the ERP to prepare the edited operation; the ERP sends the new version back as a
request with ``supersedes``, which is accepted only when it is exactly a recorded intent (``is_requested``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from erpilot_approval.domain.approvals import (
    ApprovalRequest,
    PendingApproval,
    check_deadline,
    check_fingerprint,
    refuse_not_pending,
)
from erpilot_approval.domain.permissions import authorize


@dataclass(frozen=True)
class EditIntent:
    """An edit this service asked the ledger to prepare (a row of ``approval.edits``).

    ``refusal`` (``{code, status, message}``) is how it ended without a new version: the old version ended
    before the ledger's request came, or the policy in force refused the new one. None while it waits, and
    once the new version exists (the approval with ``operation_id`` is its outcome).
    """

    operation_id: str
    pending_id: str
    editor: str
    fingerprint: str
    arguments: dict[str, Any]
    created_at: datetime
    refusal: dict[str, Any] | None = None


def edited_operation_id(old_pending_id: str, new_fingerprint: str) -> str:
    """The operation of an edit: the same edit of the same version always names the same operation, so a
    retried edit asks the ledger for the operation it already prepared (idempotent there)."""
    return "op_" + hashlib.sha256(f"edit:{old_pending_id}:{new_fingerprint}".encode()).hexdigest()[:32]


def check_edit(
    approval: PendingApproval, fingerprint: object, actor_sub: str, actor_roles: list[str], now: datetime
) -> None:
    """An edit passes the same checks as an approval: role, SoD, pending, deadline, fingerprint."""
    authorize(approval, "approve", actor_sub, actor_roles)
    if approval.status != "pending":
        refuse_not_pending(approval)
    check_deadline(approval, now)
    check_fingerprint(approval, fingerprint)


def is_requested(intent: EditIntent | None, old: PendingApproval | None, request: ApprovalRequest,
                 supersedes: str) -> bool:
    """Whether a request with ``supersedes`` is the ledger's answer to exactly this recorded edit: the intent's
    operation, fingerprint and arguments, of the old version's call, session, tool and requester, replacing the
    old version's operation. Anything else was never asked for here."""
    if intent is None or old is None or intent.pending_id != old.pending_id:
        return False
    return (request.operation_id == intent.operation_id and request.fingerprint == intent.fingerprint
            and request.arguments == intent.arguments and supersedes == old.operation_id
            and (request.call_id, request.session_id, request.tool, request.tool_schema_version,
                 request.requested_by)
            == (old.call_id, old.session_id, old.tool, old.tool_schema_version, old.requested_by))


def still_editable(old: PendingApproval, now: datetime) -> None:
    """The old version may still be replaced when the ledger's request arrives: pending and before its
    deadline (the editor's role and the fingerprint were checked when the intent was recorded)."""
    if old.status != "pending":
        refuse_not_pending(old)
    check_deadline(old, now)


def edited_version(new: PendingApproval, old: PendingApproval, editor: str) -> PendingApproval:
    """The new version an edit made: it records its editor and every earlier one (separation of duties)."""
    editors = old.editors if editor in old.editors else (*old.editors, editor)
    return replace(new, edited_by=editor, editors=editors)


def supersede(
    old: PendingApproval, new_pending_id: str, now: datetime, decided_by: str | None = None
) -> PendingApproval:
    """End a pending approval because an edit replaced it with ``new_pending_id``."""
    if old.status != "pending":
        refuse_not_pending(old)
    return replace(
        old, status="superseded", superseded_by=new_pending_id, decided_by=decided_by, decided_at=now
    )
