"""The audit log, for admins: every request, vote, decision, edit, expiry, grant and commit outcome."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from erpilot_contracts import requests
from erpilot_contracts.approval.v1 import AuditPageV1, AuditQueryV1
from erpilot_gateway.auth import CurrentUser, require_roles
from erpilot_gateway.problems import Problem
from erpilot_gateway.query_times import Since

router = APIRouter(prefix="/v1/audit", tags=["audit"])


# Documented as ``AuditPageV1`` and passed on unparsed (below): what a newer service adds reaches the client too.
@router.get("", dependencies=[require_roles("admin")], response_model=None, responses={200: {"model": AuditPageV1}})
async def audit(request: Request, user: CurrentUser, since: Since,
                pending_id: Annotated[str | None, Query(max_length=100)] = None,
                operation_id: Annotated[str | None, Query(max_length=100)] = None,
                limit: Annotated[int, Query(ge=1, le=5000)] = 1000) -> dict:
    """The audit rows about one approval (``pending_id``) or operation (``operation_id``), or since a time,
    oldest first, each with ``seq``, ``prev_hash``, ``hash`` and ``signature`` (``erpilot audit verify``)."""
    if pending_id is None and operation_id is None and since is None:
        raise Problem(422, "invalid_query", "give pending_id, operation_id or since")
    query = AuditQueryV1(actor=user.actor(), pending_id=pending_id, operation_id=operation_id, since=since,
                         limit=limit)
    # Passed on as the service sent it, not read typed: each row is hashed and signed, and a row from an approval
    # service newer than this gateway may carry a field its ``AuditRowV1`` does not know; parsing would drop it
    # (unknown fields are ignored) and the row would no longer verify against its hash (`erpilot audit verify`).
    return await request.app.state.services.data(requests.APPROVAL_AUDIT, query)
