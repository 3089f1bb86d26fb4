"""What the write tools exchange with the adapter: the state it loads, what prepare and commit return."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from erpilot_erp.domain.model import Customer, DraftRevision, Order, Product, Refund

StockCheck = Literal["exact", "sufficient"]
"""SPEC §6: ``exact`` commits only if on-hand still equals what the preview showed; ``sufficient`` only
if on-hand still covers every line."""


@dataclass(frozen=True)
class WriteState:
    """The current rows a write tool needs, loaded by key (and locked FOR UPDATE on commit).

    | tool             | fields to load                                                             |
    |------------------|----------------------------------------------------------------------------|
    | submit_order     | ``latest_draft`` (of ``args.draft_id``), ``customer`` (the draft's),       |
    |                  | ``products`` (every SKU on the latest revision's lines)                    |
    | cancel_order     | ``order``, ``products`` (every SKU on the order's lines)                   |
    | adjust_stock     | ``products`` (``args.sku``)                                                |
    | refund_payment   | ``order``                                                                  |

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


@dataclass(frozen=True)
class Prepared:
    """The outcome of prepare: ``facts`` to store with the operation, ``preview`` to show the approver.

    Both are JSON-serialisable; ``preview`` validates as ``erpilot_contracts.erp.v1.PreviewV1``.
    ``facts`` is handed back unchanged to commit, which re-checks each of them.
    """

    facts: dict[str, Any]
    preview: dict[str, Any]


@dataclass(frozen=True)
class StockChange:
    """Set a product's on-hand from ``before`` to ``after`` (apply as ``... WHERE on_hand = before``)."""

    sku: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True)
class DraftSubmission:
    """Mark draft ``draft_id`` submitted: revision ``revision`` became order ``order_id``."""

    draft_id: str
    revision: int
    order_id: str


@dataclass(frozen=True)
class CommitPlan:
    """Every effect of one committed write, for the adapter to apply in the commit's transaction.

    ``result`` is the tool result to record under the operation_id and return to the agent.
    """

    result: dict[str, Any]
    stock_changes: tuple[StockChange, ...] = ()
    new_order: Order | None = None
    updated_order: Order | None = None
    submitted_draft: DraftSubmission | None = None
    new_refund: Refund | None = None


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
