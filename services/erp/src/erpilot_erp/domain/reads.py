"""Read tools that need a rule, not just a lookup: searching and finding the session's order task."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from erpilot_erp.domain.model import Customer, DraftRevision, Product
from erpilot_erp.domain.owners import is_owner

MAX_SEARCH_RESULTS = 50


def matching_products(products: Iterable[Product], query: str) -> list[Product]:
    """Products whose SKU or name contains ``query``, ordered by SKU, at most ``MAX_SEARCH_RESULTS``."""
    return sorted((p for p in products if _matches(query, p.sku, p.name)), key=lambda p: p.sku)[:MAX_SEARCH_RESULTS]


def matching_customers(customers: Iterable[Customer], query: str) -> list[Customer]:
    """Customers whose id or name contains ``query``, ordered by id, at most ``MAX_SEARCH_RESULTS``."""
    return sorted((c for c in customers if _matches(query, c.customer_id, c.name)),
                  key=lambda c: c.customer_id)[:MAX_SEARCH_RESULTS]


def listing(found: Iterable[Product | Customer]) -> dict[str, Any]:
    """``{"items": [...]}``: a search's result (SPEC §2 lists)."""
    return {"items": [value.to_result() for value in found]}


def get_order_task(latest_revisions: Iterable[DraftRevision], session_id: str, requested_by: str) -> dict[str, Any]:
    """The session's one open draft of ``requested_by`` (``ok``), its several (``ambiguous``), or ``none``.

    ``latest_revisions`` are the latest revision of each draft; submitted drafts, other sessions' drafts and
    drafts ``requested_by`` does not own (``domain.owners``) are ignored here, so the adapter may pass a broader set.
    """
    open_drafts = [d for d in latest_revisions
                   if d.session_id == session_id and d.is_open and is_owner(d.owner, requested_by)]
    if not open_drafts:
        return {"status": "none"}
    if len(open_drafts) == 1:
        return {"status": "ok", "draft": open_drafts[0].to_result()}
    # Several open drafts: the agent must ask which one is meant instead of guessing.
    open_drafts.sort(key=lambda d: (d.created_at, d.draft_id))
    return {"status": "ambiguous", "candidates": [d.to_candidate() for d in open_drafts]}


def page_draft(draft: dict[str, Any], offset: int | None, limit: int | None) -> dict[str, Any]:
    """A ``get_draft`` result: the revision with ``line_count`` (all its lines), paged by ``offset``/``limit``.

    Lines keep their ``item_number``, so a page says which lines it holds; the totals
    (``total_amount_minor``, ``line_count``) always cover the whole revision. Without offset and limit
    every line is returned. A page past the end has no lines (``line_count`` says how many there are).
    """
    lines = draft.get("lines") or []
    paged = {**draft, "line_count": len(lines)}
    if offset is None and limit is None:
        return paged
    start = offset or 0
    stop = len(lines) if limit is None else start + limit
    paged["lines"] = lines[start:stop]
    paged["offset"] = start
    if limit is not None:
        paged["limit"] = limit
    return paged


def _matches(query: str, identifier: str, name: str) -> bool:
    # casefold() rather than lower(): it also folds e.g. German "ß" so "strasse" finds "Straße".
    needle = query.strip().casefold()
    return needle in identifier.casefold() or needle in name.casefold()
