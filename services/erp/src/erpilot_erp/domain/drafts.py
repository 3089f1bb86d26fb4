"""Order drafts: create a quote, edit it revision by revision, read it back within its own session, by its owner.

Every function takes the draft's LATEST revision as loaded by the adapter and returns the next revision
for it to insert; the loaded revision is never modified. Each new revision re-reads the current catalog
(price, name, status, stock) and the customer's discount, because drafts reserve nothing. A new revision
may not contain a discontinued product (remove that line first). A SKU may appear on several lines.

A draft is its session's and its creator's (``owner``, ``domain.owners``): only that person, in that session,
reads or edits it; every new revision keeps the owner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from erpilot_erp.domain.errors import BusinessError, ErrorCode, not_found
from erpilot_erp.domain.model import Customer, DraftLine, DraftRevision, Product
from erpilot_erp.domain.owners import owned_draft
from erpilot_erp.domain.pricing import line_total_minor, total_minor

DEFAULT_QUOTE_TTL = timedelta(hours=24)
"""How long a draft revision's prices stand (``valid_until = created_at + quote_ttl``)."""

Wanted = Sequence[tuple[str, int]]
"""The (sku, qty) pairs a new revision should contain, in line order."""


@dataclass(frozen=True)
class CreateDraft:
    """A new draft for ``customer_id`` with ``lines`` ((sku, qty), at least one) and an optional note."""

    customer_id: str
    lines: tuple[tuple[str, int], ...]
    note: str | None = None


@dataclass(frozen=True)
class UpdateDraftLine:
    tool: ClassVar[str] = "update_draft_line"
    draft_id: str
    base_revision: int
    item_number: int
    expected_sku: str
    qty: int


@dataclass(frozen=True)
class AddDraftLine:
    tool: ClassVar[str] = "add_draft_line"
    draft_id: str
    base_revision: int
    sku: str
    qty: int


@dataclass(frozen=True)
class RemoveDraftLine:
    tool: ClassVar[str] = "remove_draft_line"
    draft_id: str
    base_revision: int
    item_number: int
    expected_sku: str


@dataclass(frozen=True)
class SetDraftNote:
    tool: ClassVar[str] = "set_draft_note"
    draft_id: str
    base_revision: int
    note: str


DraftEdit = UpdateDraftLine | AddDraftLine | RemoveDraftLine | SetDraftNote
"""One edit of a draft's latest revision (the service layer maps an edit tool's arguments to it)."""


def create_draft(
    draft_id: str,
    session_id: str,
    customer: Customer | None,
    products: Mapping[str, Product],
    args: CreateDraft,
    now: datetime,
    quote_ttl: timedelta = DEFAULT_QUOTE_TTL,
    *,
    owner: str,
) -> DraftRevision:
    """Revision 1 of a new draft for ``args.customer_id`` (``customer`` is None when it does not exist), owned by
    ``owner``: the person vouched for as its requester."""
    if customer is None:
        raise not_found("customer", args.customer_id)
    wanted = list(args.lines)
    # The first line's product fixes the draft's currency; every other line must share it.
    currency = _product(products, wanted[0][0]).currency
    return _build_revision(
        draft_id=draft_id,
        revision=1,
        session_id=session_id,
        owner=owner,
        customer=customer,
        products=products,
        wanted=wanted,
        currency=currency,
        note=args.note,
        now=now,
        quote_ttl=quote_ttl,
    )


def update_draft_line(
    latest: DraftRevision | None, args: UpdateDraftLine, *, session_id: str, requested_by: str,
    customer: Customer | None,
    products: Mapping[str, Product], now: datetime, quote_ttl: timedelta = DEFAULT_QUOTE_TTL,
) -> DraftRevision:
    """A new revision where line ``item_number`` (which must hold ``expected_sku``) has quantity ``qty``."""
    draft = _editable(latest, session_id, requested_by, args.draft_id, args.base_revision)
    _target_line(draft, args.item_number, args.expected_sku)
    wanted = [
        (line.sku, args.qty if line.item_number == args.item_number else line.qty) for line in draft.lines
    ]
    return _next_revision(draft, wanted, draft.note, customer, products, now, quote_ttl)


def add_draft_line(
    latest: DraftRevision | None, args: AddDraftLine, *, session_id: str, requested_by: str,
    customer: Customer | None,
    products: Mapping[str, Product], now: datetime, quote_ttl: timedelta = DEFAULT_QUOTE_TTL,
) -> DraftRevision:
    """A new revision with ``sku`` x ``qty`` appended as the last line."""
    draft = _editable(latest, session_id, requested_by, args.draft_id, args.base_revision)
    wanted = [(line.sku, line.qty) for line in draft.lines] + [(args.sku, args.qty)]
    return _next_revision(draft, wanted, draft.note, customer, products, now, quote_ttl)


def remove_draft_line(
    latest: DraftRevision | None, args: RemoveDraftLine, *, session_id: str, requested_by: str,
    customer: Customer | None,
    products: Mapping[str, Product], now: datetime, quote_ttl: timedelta = DEFAULT_QUOTE_TTL,
) -> DraftRevision:
    """A new revision without line ``item_number`` (which must hold ``expected_sku``); later lines move up."""
    draft = _editable(latest, session_id, requested_by, args.draft_id, args.base_revision)
    _target_line(draft, args.item_number, args.expected_sku)
    wanted = [(line.sku, line.qty) for line in draft.lines if line.item_number != args.item_number]
    return _next_revision(draft, wanted, draft.note, customer, products, now, quote_ttl)


def set_draft_note(
    latest: DraftRevision | None, args: SetDraftNote, *, session_id: str, requested_by: str,
    customer: Customer | None,
    products: Mapping[str, Product], now: datetime, quote_ttl: timedelta = DEFAULT_QUOTE_TTL,
) -> DraftRevision:
    """A new revision with the same lines (re-priced) and ``note`` replaced."""
    draft = _editable(latest, session_id, requested_by, args.draft_id, args.base_revision)
    wanted = [(line.sku, line.qty) for line in draft.lines]
    return _next_revision(draft, wanted, args.note, customer, products, now, quote_ttl)


_EDITS = {
    UpdateDraftLine: update_draft_line,
    AddDraftLine: add_draft_line,
    RemoveDraftLine: remove_draft_line,
    SetDraftNote: set_draft_note,
}
DRAFT_EDIT_TOOLS = frozenset(edit.tool for edit in _EDITS)


def edit_draft(
    args: DraftEdit, latest: DraftRevision | None, *, session_id: str, requested_by: str,
    customer: Customer | None, products: Mapping[str, Product], now: datetime,
    quote_ttl: timedelta = DEFAULT_QUOTE_TTL,
) -> DraftRevision:
    """Run one edit on the draft's latest revision, for ``requested_by`` (who must own it)."""
    edit = _EDITS.get(type(args))
    if edit is None:
        raise ValueError(f"{args!r} is not a draft edit")
    return edit(latest, args, session_id=session_id, requested_by=requested_by, customer=customer,
                products=products, now=now, quote_ttl=quote_ttl)


def read_draft(revision: DraftRevision | None, session_id: str, draft_id: str, *, requested_by: str) -> DraftRevision:
    """The loaded revision if it is ``session_id``'s and ``requested_by`` owns it; a missing one, another session's
    or another person's (or nobody's) is not_found."""
    return owned_draft(revision, session_id=session_id, requested_by=requested_by, draft_id=draft_id)


def _editable(
    latest: DraftRevision | None, session_id: str, requested_by: str, draft_id: str, base_revision: int
) -> DraftRevision:
    draft = read_draft(latest, session_id, draft_id, requested_by=requested_by)
    if not draft.is_open:
        raise BusinessError(
            ErrorCode.DRAFT_CLOSED, f"draft {draft_id} was already submitted and can no longer change"
        )
    if base_revision != draft.revision:
        raise BusinessError(
            ErrorCode.DRAFT_CHANGED,
            f"draft {draft_id} is at revision {draft.revision}, not {base_revision}; "
            "read it again before editing",
            latest_revision=draft.revision,
        )
    return draft


def _target_line(draft: DraftRevision, item_number: int, expected_sku: str) -> DraftLine:
    line = draft.line(item_number)
    if line is None:
        raise BusinessError(
            ErrorCode.LINE_NOT_FOUND,
            f"draft {draft.draft_id} revision {draft.revision} has no line {item_number} "
            f"(it has {len(draft.lines)})",
        )
    if line.sku != expected_sku:
        raise BusinessError(
            ErrorCode.SKU_MISMATCH,
            f"line {item_number} of draft {draft.draft_id} holds {line.sku}, not {expected_sku}",
            actual_sku=line.sku,
        )
    return line


def _next_revision(
    draft: DraftRevision, wanted: Wanted, note: str | None, customer: Customer | None,
    products: Mapping[str, Product], now: datetime, quote_ttl: timedelta,
) -> DraftRevision:
    if customer is None:
        raise not_found("customer", draft.customer_id)
    return _build_revision(
        draft_id=draft.draft_id,
        revision=draft.revision + 1,
        session_id=draft.session_id,
        owner=draft.owner,
        customer=customer,
        products=products,
        wanted=wanted,
        currency=draft.currency,
        note=note,
        now=now,
        quote_ttl=quote_ttl,
    )


def _build_revision(
    *, draft_id: str, revision: int, session_id: str, owner: str | None, customer: Customer,
    products: Mapping[str, Product],
    wanted: Wanted, currency: str, note: str | None, now: datetime, quote_ttl: timedelta,
) -> DraftRevision:
    lines = tuple(
        _priced_line(item_number, sku, qty, customer, products, currency)
        for item_number, (sku, qty) in enumerate(wanted, start=1)
    )
    return DraftRevision(
        draft_id=draft_id,
        revision=revision,
        session_id=session_id,
        owner=owner,
        customer_id=customer.customer_id,
        customer_name=customer.name,
        lines=lines,
        total_amount_minor=total_minor(line.line_total_minor for line in lines),
        currency=currency,
        note=note,
        valid_until=now + quote_ttl,
        created_at=now,
    )


def _priced_line(
    item_number: int, sku: str, qty: int, customer: Customer, products: Mapping[str, Product], currency: str
) -> DraftLine:
    product = _product(products, sku)
    if not product.is_active:
        raise BusinessError(
            ErrorCode.PRODUCT_UNAVAILABLE, f"{sku} ({product.name}) is discontinued; remove it from the draft"
        )
    if product.currency != currency:
        raise BusinessError(
            ErrorCode.CURRENCY_MISMATCH, f"{sku} is priced in {product.currency}, the draft in {currency}"
        )
    return DraftLine(
        item_number=item_number,
        sku=sku,
        name=product.name,
        qty=qty,
        unit_price_minor=product.price_minor,
        discount_pct=customer.discount_pct,
        line_total_minor=line_total_minor(qty, product.price_minor, customer.discount_pct),
        stock_before=product.on_hand,
    )


def _product(products: Mapping[str, Product], sku: str) -> Product:
    product = products.get(sku)
    if product is None:
        raise not_found("product", sku)
    return product
