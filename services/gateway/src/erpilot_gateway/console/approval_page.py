"""The approval page (SPEC §5) and its status poll: the approval record and, once approved, the ERP's
status of its operation, read as their contract models (``ApprovalRecordV1``, ``OperationStatusV1``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from erpilot_contracts import requests
from erpilot_contracts.approval.v1 import ApprovalRecordV1, AuditQueryV1, GetApprovalV1
from erpilot_contracts.erp.v1 import GetOperationV1, OperationStatusV1
from erpilot_gateway.auth import User
from erpilot_gateway.console import views
from erpilot_gateway.console.pages import page, signin, viewer
from erpilot_gateway.problems import Problem, problem_response

router = APIRouter(include_in_schema=False)


async def _operation(request: Request, record: ApprovalRecordV1) -> OperationStatusV1 | None:
    """The ERP's status of the approval's operation, for anyone who may see the approval.

    The approver usually does not own the requester's session (so not the tool call, nor the
    owner-only ``/v1/operations``); seeing the result of the very operation they may decide is no more
    than the approval itself shows, so it is read here with the approval as the permission.
    """
    if record.status != "approved":
        return None
    try:
        return await request.app.state.services.call(
            requests.ERP_OPERATION, GetOperationV1(operation_id=record.operation_id))
    except Problem:  # refused, or the ERP is away: the page shows the approval without it
        return None


async def _approval(request: Request, user: User, pending_id: str) -> ApprovalRecordV1:
    return await request.app.state.services.call(
        requests.APPROVAL_GET, GetApprovalV1(pending_id=pending_id, actor=user.actor()))


async def _audit_trail(request: Request, user: User, pending_id: str) -> dict[str, Any] | None:
    """Admins only: the approval's audit rows as ``GET /v1/audit?pending_id=`` answers them, with a short
    hash prefix; ``None`` for anyone else, so the page has nothing to show or leak. A failed read is said."""
    if not user.has_any("admin"):
        return None
    try:
        found = await request.app.state.services.call(requests.APPROVAL_AUDIT,
                                                      AuditQueryV1(actor=user.actor(), pending_id=pending_id))
    except Problem as exc:
        return {"rows": [], "error": exc.detail}
    return {"rows": [{"seq": row.seq, "at": row.at, "kind": row.kind, "actor": row.actor or "—",
                      "hash": row.hash[:12]} for row in found.items], "error": None}


def _verdict(record: ApprovalRecordV1, user: User) -> tuple[bool, str | None]:
    """May this person approve, and if not why: the approval service's answer for them (``can_decide``).

    An approval service that predates the field answers without it; then the page falls back to what it
    can tell itself (role, status, deadline) and leaves separation of duties to the decision's 403.
    """
    if record.can_decide is not None:
        return record.can_decide, None if record.can_decide else record.cannot_decide_reason
    if not any(role in record.required_roles for role in user.roles):
        return False, "role"
    if record.status != "pending":
        return False, {"expired": "expired", "superseded": "superseded"}.get(record.status, "already_decided")
    if datetime.now(UTC) >= views.parse_time(record.expires_at):
        return False, "expired"
    return True, None


def _views(record: ApprovalRecordV1, operation: OperationStatusV1 | None) -> dict[str, Any]:
    """The decision and the outcome as the page and its script show them."""
    return {"decision": views.decision_view(record), "outcome": views.outcome_view(record, operation)}


def _state(record: ApprovalRecordV1, operation: OperationStatusV1 | None) -> dict[str, Any]:
    return {"pending_id": record.pending_id, "status": record.status, "expires_at": views.iso(record.expires_at),
            **_views(record, operation), **views.quorum_view(record)}


@router.get("/resume/{pending_id}")
async def approval_page(request: Request, pending_id: str) -> Response:
    """The approval page (SPEC §5): everything the decision binds to, and approve / reject."""
    user, error = viewer(request)
    next_path = f"/resume/{pending_id}"
    if user is None:
        return signin(request, next_path=next_path, error=error, heading="Sign in to review this approval")
    try:
        record = await _approval(request, user, pending_id)
    except Problem as exc:  # refused, or the approval service is away (503 service_unavailable)
        if exc.status in (403, 404):
            return page(request, "approval_denied.html", {"user": user, "pending_id": pending_id}, 404)
        return page(request, "approval_error.html", {"user": user, "pending_id": pending_id,
                                                     "code": exc.code, "detail": exc.detail}, exc.status)
    operation = await _operation(request, record)
    preview = record.preview
    details = preview.details
    can_decide, reason = _verdict(record, user)
    audit = await _audit_trail(request, user, record.pending_id)
    return page(request, "approval.html", {
        "user": user,
        "record": record,
        "preview": preview,
        "amount": views.money(preview.amount_minor, preview.currency),
        "effects": views.effect_rows(preview),
        "notes": list(preview.notes),
        "draft": views.draft_view(details, preview.currency) if views.acts_on_draft(record.tool) else None,
        "other_details": views.other_details(details, preview.currency),
        "arguments_json": views.pretty_json(record.arguments),
        **_views(record, operation),
        "can_decide": can_decide,
        "cannot_decide_reason": reason,
        "cannot_decide_text": views.cannot_decide_text(reason, record.required_roles, list(user.roles)),
        "deciding_for": record.can_decide_for if can_decide else None,
        "escalation": views.escalation_view(record),
        "state_json": json.dumps(_state(record, operation)),
        "audit": audit,
    })


@router.get("/resume/{pending_id}/status")
async def approval_status(request: Request, pending_id: str) -> JSONResponse:
    """What the approval page polls: the decision and, once approved, the business outcome."""
    user, _ = viewer(request)
    if user is None:
        return problem_response(401, "unauthorized", "sign in first", request.url.path)
    record = await _approval(request, user, pending_id)
    operation = await _operation(request, record)
    return JSONResponse(_state(record, operation), headers={"Cache-Control": "no-store"})
