"""Edits (SPEC §3.3): new arguments make a new pending version of the same call, the old one ends
``superseded``. An edit passes the checks of an approval; the new version records every editor so
separation of duties keeps every one of them from approving it. Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from erpilot_approval.domain.approvals import (
    ApprovalRequest,
    PendingApproval,
    authorize,
    check_deadline,
    check_fingerprint,
    refuse_not_pending,
)


def check_edit(
    approval: PendingApproval, fingerprint: object, actor_sub: str, actor_roles: list[str], now: datetime
) -> None:
    """An edit passes the same checks as an approval: role, SoD, pending, deadline, fingerprint."""
    authorize(approval, "approve", actor_sub, actor_roles)
    if approval.status != "pending":
        refuse_not_pending(approval)
    check_deadline(approval, now)
    check_fingerprint(approval, fingerprint)


def edit_request(
    old: PendingApproval,
    arguments: dict[str, Any],
    fingerprint: str,
    operation_id: str,
    preview: dict[str, Any],
) -> ApprovalRequest:
    """The request for the edited version: same call, session, tool and requester; new arguments."""
    return ApprovalRequest(
        call_id=old.call_id,
        session_id=old.session_id,
        tool=old.tool,
        tool_schema_version=old.tool_schema_version,
        arguments=arguments,
        fingerprint=fingerprint,
        operation_id=operation_id,
        preview=preview,
        requested_by=old.requested_by,
    )


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
