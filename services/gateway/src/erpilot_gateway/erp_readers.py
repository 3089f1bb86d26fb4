"""Who may read a draft or an order over HTTP (SPEC §10).

- Its owner: the person who created the draft (an order: the owner of the draft it was made from). The ERP records
  the owner from the gateway-signed requester assertion it verified itself and gives it in its view (``owner``);
  nothing the agent says decides it.
- An approver or a manager who may decide an approval, pending or decided, whose arguments name it (for an order:
  it or the draft it was made from), as the approval service answers (``query.approval.referring``).
- An admin, always.
- An order no session made (the back office's history, as seeded) is the back office's: every requester may read
  it, as the model's ``get_order`` tool does.

A draft or an order without an owner (made before owners were recorded) is nobody's: only the approvers and admins
above read it. Anyone else gets the same 404 as for an id that does not exist: whether a draft or an order exists
is not theirs to learn. The ERP's ``session_id`` and ``owner`` are never shown to clients.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from erpilot_contracts import requests
from erpilot_contracts.approval.v1 import Actor, FindReferringApprovalV1
from erpilot_contracts.erp.v1 import DraftRevisionV1, ErpViewV1, OrderV1
from erpilot_gateway.auth import User
from erpilot_gateway.problems import Problem
from erpilot_gateway.services import Services

V = TypeVar("V", bound=BaseModel)
Shown = TypeVar("Shown", OrderV1, DraftRevisionV1)


async def viewed(services: Services, view: ErpViewV1, model: type[V]) -> V:
    """The ERP's answer to ``view`` as the model that view answers (``ErpViewResultV1`` is a union of them)."""
    return model.model_validate((await services.call(requests.ERP_VIEW, view)).root.model_dump())


async def shown(services: Services, user: User, view: ErpViewV1, model: type[Shown]) -> Shown:
    """The ``order`` or ``draft`` view (``model``), or the one 404 for "unknown" and "not yours"; the client is
    never shown its ``session_id`` and ``owner`` (the routes leave them out)."""
    about = f"{view.view} {view.id}" + (f" revision {view.revision}" if view.revision is not None else "")
    not_found = Problem(404, "not_found", f"{about} not found")
    try:
        found = await viewed(services, view, model)
    except Problem as problem:
        if problem.status == 404:
            raise not_found from None
        raise
    if not await may_read(services, user, view.view, found.model_dump(mode="json"), session_id=found.session_id,
                          owner=found.owner):
        raise not_found
    return found


async def may_read(services: Services, user: User, kind: str, found: dict[str, Any], *, session_id: str | None,
                   owner: str | None) -> bool:
    """Whether ``user`` may read this ``draft`` or ``order`` (``found``: the ERP's view of it, ``session_id`` and
    ``owner`` as the ERP recorded them)."""
    if user.has_any("admin"):
        return True
    if session_id is None and owner is None:
        return kind == "order" and user.has_any("requester")
    if owner is not None and owner == user.sub:
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
