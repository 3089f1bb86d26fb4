"""A tiny, mutable catalog for the ERP domain tests: change a product, then see what the rules say."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from erpilot_contracts.tools.v1 import CreateOrderDraftArgs
from erpilot_erp.domain.drafts import create_draft, edit_draft
from erpilot_erp.domain.model import Customer, DraftRevision, Order, OrderLine, Product
from erpilot_erp.domain.plans import WriteState

NOW = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)
SESSION = "S-1"


class Catalog:
    """Products and customers by key, plus shortcuts to make drafts, orders and write states from them."""

    now = NOW
    session = SESSION

    def __init__(self) -> None:
        self.products: dict[str, Product] = {
            p.sku: p
            for p in [
                Product("SKU-A", "Widget A", "active", 1000, "EUR", 12),
                Product("SKU-B", "Widget B", "active", 250, "EUR", 5),
                Product("SKU-OLD", "Old widget", "discontinued", 500, "EUR", 3),
                Product("SKU-USD", "Imported widget", "active", 999, "USD", 10),
                Product("SKU-ZERO", "Sold-out widget", "active", 700, "EUR", 0),
            ]
        }
        self.customers: dict[str, Customer] = {
            "C-1": Customer("C-1", "Alpha Trading GmbH", 0),
            "C-2": Customer("C-2", "Beta Bau Aktiengesellschaft", 10),
        }

    @staticmethod
    def stored(facts: dict[str, Any]) -> dict[str, Any]:
        """Facts as they come back from the operations table: through JSON, so nothing non-JSON survives."""
        return json.loads(json.dumps(facts))

    def change(self, sku: str, **changes: Any) -> None:
        """Change a product in place, as a back-office edit or another commit would."""
        self.products[sku] = replace(self.products[sku], **changes)

    def create(
        self, lines: list[tuple[str, int]] | None = None, *, customer_id: str = "C-1",
        session_id: str = SESSION, note: str | None = None, draft_id: str = "D-1", now: datetime = NOW,
        quote_ttl: timedelta | None = None,
    ) -> DraftRevision:
        """Revision 1 of a draft (default: 2 x SKU-A for C-1)."""
        args = CreateOrderDraftArgs.model_validate(
            {"customer_id": customer_id, "lines": [{"sku": s, "qty": q} for s, q in lines or [("SKU-A", 2)]]}
            | ({"note": note} if note is not None else {})
        )
        ttl = {"quote_ttl": quote_ttl} if quote_ttl else {}
        customer = self.customers.get(customer_id)
        return create_draft(draft_id, session_id, customer, self.products, args, now, **ttl)

    def edit(
        self, tool: str, latest: DraftRevision, *, session_id: str = SESSION, now: datetime = NOW,
        **arguments: Any,
    ) -> DraftRevision:
        """Run a draft edit tool on ``latest`` with raw arguments (draft_id and base_revision filled in)."""
        arguments = {"draft_id": latest.draft_id, "base_revision": latest.revision} | arguments
        return edit_draft(
            tool, arguments, latest, session_id=session_id, customer=self.customers.get(latest.customer_id),
            products=self.products, now=now,
        )

    def state(
        self, *, latest: DraftRevision | None = None, order: Order | None = None, session_id: str = SESSION
    ) -> WriteState:
        """The WriteState an adapter would load: customer of the draft, every current product."""
        customer = self.customers.get(latest.customer_id) if latest else None
        return WriteState(
            session_id=session_id, latest_draft=latest, customer=customer, order=order,
            products=dict(self.products),
        )

    def order(self, **changes: Any) -> Order:
        """A placed, fully paid order: 2 x SKU-A at 1000 and 4 x SKU-B at 250 for C-1 (total 3000)."""
        order = Order(
            order_id="O-1",
            customer_id="C-1",
            customer_name="Alpha Trading GmbH",
            status="placed",
            lines=(
                OrderLine("SKU-A", "Widget A", 2, 1000, 2000),
                OrderLine("SKU-B", "Widget B", 4, 250, 1000),
            ),
            total_amount_minor=3000,
            currency="EUR",
            paid_minor=3000,
            refunded_minor=0,
            created_at=NOW - timedelta(days=3),
        )
        return replace(order, **changes)


@pytest.fixture
def catalog() -> Catalog:
    return Catalog()
