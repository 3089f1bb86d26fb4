"""Whose a draft or an order is: the person the gateway vouched for when the draft was created (SPEC §10).

A draft belongs to its session AND to the person who created it (``owner``: the ``sub`` of the requester
assertion that created it, which the ERP verified itself). An order made from a draft inherits the draft's owner.
Whoever asks through a session's tool call (``requested_by``, vouched for by the gateway's assertion) reads, edits
or submits a draft, and reads, cancels or refunds an order, only if it is theirs; anything else gets the very
``not_found`` of an id that does not exist, so that another person's draft or order is never revealed to exist.

No owner (``None``):
- a draft or an order made from a draft before owners were recorded (migration 0003): nobody's, so no one reads or
  writes it through the agent; the back office (an admin over HTTP, an approver of an approval naming it) still
  reads it. The ledger holds no record of who created such a draft (a draft tool's operation stores no requester),
  so the owner is not guessed.
- an order no session made (``session_id`` None: the back office's history, as seeded): the back office's, which
  every requester may read and ask to cancel or refund, through an approval, as before.
"""

from __future__ import annotations

from erpilot_erp.domain.errors import not_found
from erpilot_erp.domain.model import DraftRevision, Order


def is_owner(owner: str | None, requested_by: str | None) -> bool:
    """Whether ``requested_by`` is the owner; an object without an owner is nobody's."""
    return owner is not None and requested_by is not None and owner == requested_by


def may_use_draft(revision: DraftRevision, *, session_id: str, requested_by: str | None) -> bool:
    """Whether ``requested_by`` may read, edit or submit the draft in ``session_id``: its session's and theirs."""
    return revision.session_id == session_id and is_owner(revision.owner, requested_by)


def owned_draft(revision: DraftRevision | None, *, session_id: str, requested_by: str | None,
                draft_id: str) -> DraftRevision:
    """``revision`` if ``requested_by`` may use it in ``session_id`` (``may_use_draft``); otherwise ``not_found``."""
    if revision is None or not may_use_draft(revision, session_id=session_id, requested_by=requested_by):
        raise not_found("draft", draft_id)
    return revision


def may_use_order(order: Order, requested_by: str | None) -> bool:
    """Whether ``requested_by`` may read the order or ask to cancel or refund it: theirs, or the back office's."""
    if order.session_id is None and order.owner is None:
        return True  # the back office's history: no session and no person made it
    return is_owner(order.owner, requested_by)


def owned_order(order: Order | None, *, requested_by: str | None, order_id: str) -> Order:
    """``order`` if ``requested_by`` may use it (``may_use_order``); otherwise ``not_found``."""
    if order is None or not may_use_order(order, requested_by):
        raise not_found("order", order_id)
    return order
