"""What the write tools exchange with the adapter: the rows it loads, what prepare and commit return, and the
shape of one write tool (``WriteTool``), which ``domain.operations`` registers in its one table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Generic, Literal, TypeVar

from erpilot_erp.domain.errors import ToolErrorCode
from erpilot_erp.domain.model import Customer, DraftRevision, Order, Product, Refund

StockCheck = Literal["exact", "sufficient"]
"""SPEC §6: ``exact`` commits only if on-hand still equals what the preview showed; ``sufficient`` only
if on-hand still covers every line."""


class Rows(Enum):
    """The rows a write tool reads, as it declares them (``WriteTool.rows``); ``service_layer.write_state`` loads
    them into a ``WriteState``, locked FOR UPDATE on commit in the one lock order (operation -> draft or order ->
    products in SKU order).

    A member named ``ORDER_...`` other than ``ORDER_PRODUCTS`` is a row set of the order: the records of one kind
    issued against it, loaded through the one port method ``LedgerRepository.row_set`` (an adapter module per
    record kind registers its loader, ``adapters.records``) into ``WriteState.row_sets``. A new record kind read
    per order is one member here and nothing else in the dispatch.
    """

    DRAFT = "draft"
    """``latest_draft`` (of ``args.draft_id``), ``customer`` (the draft's), ``products`` (every SKU on its lines
    and on the prepared facts' lines)."""
    ORDER = "order"
    """``order`` (of ``args.order_id``)."""
    ORDER_PRODUCTS = "order_products"
    """``products``: every SKU on the order's lines (with ``ORDER``)."""
    PRODUCT = "product"
    """``products``: ``args.sku``."""
    ORDER_CREDIT_NOTES = "order_credit_notes"
    """``row_set(ORDER_CREDIT_NOTES)``: the credit notes issued against the order (with ``ORDER``). Not locked: a
    credit note is only ever inserted under its order's lock, which the commit holds; they are read in a statement
    of their own after that lock is granted, so (READ COMMITTED) every note committed under it is seen."""

    @property
    def of_order(self) -> bool:
        """A row set hanging off the order: loaded by the order's id once the order is loaded (and locked)."""
        return self.name.startswith("ORDER_") and self is not Rows.ORDER_PRODUCTS


@dataclass(frozen=True)
class WriteState:
    """The current rows a write tool needs, loaded by key (and locked FOR UPDATE on commit), as its ``rows`` say.

    A missing row is simply absent (None / not in ``products``); the domain turns that into not_found.
    ``requested_by`` is the person the write is for (vouched for by the gateway's assertion): prepare refuses a
    draft or an order that is not theirs (``domain.owners``) as not_found; None is nobody, who owns nothing.
    """

    session_id: str
    requested_by: str | None = None
    latest_draft: DraftRevision | None = None
    customer: Customer | None = None
    order: Order | None = None
    products: Mapping[str, Product] = field(default_factory=dict)
    row_sets: Mapping[Rows, tuple[Any, ...]] = field(default_factory=dict)

    def row_set(self, kind: Rows) -> tuple[Any, ...]:
        """The records of row set ``kind`` (``Rows.of_order``) as loaded; none when the order is missing."""
        return tuple(self.row_sets.get(kind, ()))


@dataclass(frozen=True)
class Prepared:
    """The outcome of prepare: ``facts`` to store with the operation, ``preview`` to show the approver.

    Both are JSON-serialisable; ``preview`` validates as ``erpilot_contracts.erp.v1.PreviewV1``.
    ``facts`` is handed back unchanged to commit, which re-checks each of them.
    """

    facts: dict[str, Any]
    preview: dict[str, Any]


class Effect:
    """One change a commit makes; the repository applies each by its type, through the appliers the adapter
    modules register (``adapters.records.APPLIERS``). A tool that brings a record kind of its own defines its
    effect in its module, subclassing this."""

    __slots__ = ()


@dataclass(frozen=True)
class StockChange(Effect):
    """Set a product's on-hand from ``before`` to ``after`` (apply as ``... WHERE on_hand = before``)."""

    sku: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True)
class DraftSubmission(Effect):
    """Mark draft ``draft_id`` submitted: revision ``revision`` became order ``order_id``."""

    draft_id: str
    revision: int
    order_id: str


@dataclass(frozen=True)
class NewOrder(Effect):
    """Insert order ``order``."""

    order: Order


@dataclass(frozen=True)
class OrderChange(Effect):
    """Set the order's ``status`` and ``refunded_minor`` to those of ``order`` (the order as it becomes)."""

    order: Order


@dataclass(frozen=True)
class NewRefund(Effect):
    """Insert refund ``refund`` (recorded with the committing operation's id)."""

    refund: Refund


E = TypeVar("E", bound=Effect)


@dataclass(frozen=True)
class CommitPlan:
    """Every effect of one committed write, in order, for the adapter to apply in the commit's transaction.

    ``result`` is the tool result to record under the operation_id and return to the agent.
    """

    result: dict[str, Any]
    effects: tuple[Effect, ...] = ()

    def of(self, kind: type[E]) -> tuple[E, ...]:
        """The effects of one type, in order."""
        return tuple(effect for effect in self.effects if isinstance(effect, kind))


A = TypeVar("A")


@dataclass(frozen=True)
class WriteTool(Generic[A]):
    """One write tool, everything the dispatchers need: a domain module's ``TOOL``, which
    ``domain.operations.WRITE_TOOLS`` finds by itself.

    - ``args``: the domain's frozen request; built from the tool's normalised arguments (field by field, the
      contracts validated them) by ``parse``.
    - ``rows``: what it reads and locks (``Rows``), loaded by ``service_layer.write_state``.
    - ``prepare(args, state, now, stock_check)``: check what can never succeed; the facts and preview.
    - ``commit(args, facts, state, now, stock_check, new_id)``: re-check the facts against the locked rows and
      plan the effects; ``new_id`` is a fresh id of ``new_id_kind`` when the commit creates a record.
    - ``error_codes``: the business codes this tool alone raises, declared in its module (``ToolErrorCode``).
    """

    name: str
    args: type[A]
    rows: tuple[Rows, ...]
    prepare: Callable[[A, WriteState, datetime, StockCheck], Prepared]
    commit: Callable[[A, Mapping[str, Any], WriteState, datetime, StockCheck, str | None], CommitPlan]
    new_id_kind: str | None = None
    error_codes: tuple[ToolErrorCode, ...] = ()

    def parse(self, arguments: Mapping[str, Any]) -> A:
        """The domain's request from the tool's normalised (already validated) arguments."""
        return self.args(**arguments)  # a name the dataclass lacks is a drift from the contract: TypeError


PIECES = "pcs"


def effect(label: str, before: Any, after: Any, unit: str | None = None) -> dict[str, Any]:
    """One ``{label, before, after, unit}`` line of a preview: ``unit`` is ``pcs``, a currency code
    (before/after are then minor units) or None for a state such as an order status."""
    return {"label": label, "before": before, "after": after, "unit": unit}


def preview(
    *, operation: str, object: str, target: str, amount_minor: int | None = None, currency: str | None = None,
    effects: list[dict[str, Any]], notes: list[str], details: dict[str, Any],
) -> dict[str, Any]:
    """A ``PreviewV1``-shaped dict."""
    return {
        "operation": operation,
        "object": object,
        "target": target,
        "amount_minor": amount_minor,
        "currency": currency,
        "effects": effects,
        "notes": notes,
        "details": details,
    }
