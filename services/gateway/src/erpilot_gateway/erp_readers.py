"""Who may read a draft or an order over HTTP (SPEC §10).

- The owner of the session it came from (the draft's session; an order's is the session whose draft made it), as
  the agent knows sessions (``query.agent.session``, ``summary_only``).
- An approver or a manager who may decide an approval, pending or decided, whose arguments name it (for an order:
  it or the draft it was made from), as the approval service answers (``query.approval.referring``).
- An admin, always.
- An order no session made (the back office's history, as seeded) is the back office's: every requester may read
  it, as the model's ``get_order`` tool does.

Anyone else gets the same 404 as for an id that does not exist: whether a draft or an order exists is not theirs to
learn. The ERP says which session an object came from (``session_id`` in its view); it is never shown to clients.
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts import requests
from erpilot_contracts.agent.v1 import GetSessionV1
from erpilot_contracts.approval.v1 import Actor, FindReferringApprovalV1
from erpilot_contracts.erp.v1 import ErpViewV1
from erpilot_gateway.auth import User
from erpilot_gateway.problems import Problem
from erpilot_gateway.services import Services


async def shown(services: Services, user: User, view: ErpViewV1) -> dict[str, Any]:
    """The ``order`` or ``draft`` view as the client sees it, or the one 404 for "unknown" and "not yours"."""
    about = f"{view.view} {view.id}" + (f" revision {view.revision}" if view.revision is not None else "")
    not_found = Problem(404, "not_found", f"{about} not found")
    try:
        found = (await services.call(requests.ERP_VIEW, view)).model_dump(mode="json")
    except Problem as problem:
        if problem.status == 404:
            raise not_found from None
        raise
    session_id = found.pop("session_id", None)
    if not await may_read(services, user, view.view, found, session_id):
        raise not_found
    return found


async def may_read(services: Services, user: User, kind: str, found: dict[str, Any], session_id: str | None) -> bool:
    """Whether ``user`` may read this ``draft`` or ``order`` (``found``: the ERP's view of it)."""
    if user.has_any("admin"):
        return True
    if session_id is None:
        return kind == "order" and user.has_any("requester")
    if await owns_session(services, user, session_id):
        return True
    if not user.has_any("approver", "manager"):
        return False
    if kind == "draft":
        drafts, orders = [found["draft_id"]], []
    else:
        drafts, orders = [found["draft_id"]] if found.get("draft_id") else [], [found["order_id"]]
    referring = await services.call(requests.APPROVAL_REFERRING, FindReferringApprovalV1(
        actor=Actor(sub=user.sub, roles=list(user.roles)), draft_ids=drafts, order_ids=orders))
    return referring.pending_id is not None


async def owns_session(services: Services, user: User, session_id: str) -> bool:
    """Whether the session is ``user``'s: the agent answers its summary to the owner and 404 to anyone else."""
    try:
        await services.call(requests.AGENT_SESSION, GetSessionV1(session_id=session_id, owner=user.sub,
                                                                 summary_only=True))
    except Problem as problem:
        if problem.status == 404:
            return False
        raise
    return True
