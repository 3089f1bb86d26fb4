"""A tiny, mutable catalog for the ERP domain tests: change a product, then see what the rules say."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.erp.v1 import CommitOperationV1, ExecuteToolV1, OperationStatusV1, PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_erp.domain import operations
from erpilot_erp.domain.drafts import CreateDraft, create_draft, edit_draft
from erpilot_erp.domain.model import Customer, DraftRevision, Order, OrderLine, Product
from erpilot_erp.domain.plans import CommitPlan, Prepared, WriteState
from erpilot_erp.service_layer import to_domain
from erpilot_erp.service_layer.backoffice import ProductService
from erpilot_erp.service_layer.drafts import DraftService
from erpilot_erp.service_layer.operations import OperationService
from erpilot_erp.service_layer.reads import ReadTools
from erpilot_erp.service_layer.requesters import Requesters
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.grants import sign_grant
from services.erp.tests.fakes import LedgerState, memory_ledger

NOW = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)
SESSION = "S-1"
OWNER = "tester"  # the person the drafts of these tests are vouched for (Desk.requester too)
# The chat run the desk's calls belong to (``<RUN>:call-N``): its assertion covers every one of them.
RUN = "run-desk"


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
        quote_ttl: timedelta | None = None, owner: str = OWNER,
    ) -> DraftRevision:
        """Revision 1 of a draft (default: 2 x SKU-A for C-1, owned by ``OWNER``)."""
        args = CreateDraft(customer_id, tuple(lines or [("SKU-A", 2)]), note)
        ttl = {"quote_ttl": quote_ttl} if quote_ttl else {}
        customer = self.customers.get(customer_id)
        return create_draft(draft_id, session_id, customer, self.products, args, now, **ttl, owner=owner)

    def edit(
        self, tool: str, latest: DraftRevision, *, session_id: str = SESSION, now: datetime = NOW,
        requested_by: str = OWNER, **arguments: Any,
    ) -> DraftRevision:
        """Run a draft edit tool on ``latest`` with raw arguments (draft_id and base_revision filled in)."""
        arguments = {"draft_id": latest.draft_id, "base_revision": latest.revision} | arguments
        return edit_draft(
            to_domain.draft_edit(tool, arguments), latest, session_id=session_id, requested_by=requested_by,
            customer=self.customers.get(latest.customer_id), products=self.products, now=now,
        )

    @staticmethod
    def prepare(tool: str, arguments: dict[str, Any], state: WriteState, now: datetime, **kw: Any) -> Prepared:
        """The domain's prepare of a write tool's raw arguments, mapped as the service layer maps them."""
        return operations.prepare(to_domain.write(tool, arguments), state, now, **kw)

    @staticmethod
    def commit(tool: str, arguments: dict[str, Any], facts: dict[str, Any], state: WriteState, now: datetime,
               **kw: Any) -> CommitPlan:
        """The domain's commit of a write tool's raw arguments, mapped as the service layer maps them."""
        return operations.commit(to_domain.write(tool, arguments), facts, state, now, **kw)

    def state(
        self, *, latest: DraftRevision | None = None, order: Order | None = None, session_id: str = SESSION,
        requested_by: str | None = OWNER,
    ) -> WriteState:
        """The WriteState an adapter would load for ``requested_by``: customer of the draft, every current product."""
        customer = self.customers.get(latest.customer_id) if latest else None
        return WriteState(
            session_id=session_id, requested_by=requested_by, latest_draft=latest, customer=customer, order=order,
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


class Desk:
    """The ERP's use cases on an in-memory ledger seeded from a ``Catalog``: no broker, no database.

    Builds the commands as the agent sends them (normalised arguments, their fingerprint, the gateway's requester
    assertion for ``tester`` in ``S-1``) and signs grants with its own key, which the ``OperationService``
    verifies; the ``OperationService`` signs its approval requests with ``ledger_key``. The services read the
    ledger's clock (``desk.ledger.advance`` moves time).
    """

    requester = OWNER

    def __init__(self, catalog: Catalog) -> None:
        self.ledger = memory_ledger(LedgerState(products=dict(catalog.products), customers=dict(catalog.customers)),
                                    now=NOW)
        self.key = Ed25519PrivateKey.generate()
        self.assertion_key = Ed25519PrivateKey.generate()
        self.ledger_key = Ed25519PrivateKey.generate()  # the ERP's own
        requesters = Requesters(self.assertion_key.public_key())
        clock = self.ledger.clock
        self.drafts = DraftService(self.ledger, requesters, quote_ttl=timedelta(minutes=30), clock=clock)
        self.operations = OperationService(self.ledger, self.key.public_key(), requesters, self.ledger_key,
                                           clock=clock)
        self.reads = ReadTools(self.ledger, requesters, clock=clock)
        self.products = ProductService(self.ledger)
        self._ids = itertools.count(1)

    @property
    def state(self) -> LedgerState:
        return self.ledger.state

    def next(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def call_id(self) -> str:
        return f"{RUN}:{self.next('call')}"

    def assertion(self, *, sub: str = requester, session_id: str = SESSION, key: Ed25519PrivateKey | None = None,
                  issued: datetime | None = None, **kw: Any) -> str:
        """The gateway's requester assertion (valid for an hour from ``issued``, default now) for the desk's run
        ``RUN``, or for what ``kw`` names (``call_id`` and ``tool`` of one call, ``run_id``; ``ttl``)."""
        bound = {} if "call_id" in kw or "run_id" in kw else {"run_id": RUN}
        return sign_assertion(key or self.assertion_key, sub=sub, roles=["requester"], session_id=session_id,
                              now=issued or self.ledger.clock(), **bound, **kw)

    def draft_cmd(self, tool: str, arguments: dict[str, Any], *, operation_id: str | None = None,
                  session_id: str = SESSION, **changes: Any) -> ExecuteToolV1:
        cmd = ExecuteToolV1(session_id=session_id, call_id=self.call_id(), tool=tool, requested_by=self.requester,
                            operation_id=operation_id or self.next("op"), arguments=arguments,
                            assertion=self.assertion(session_id=session_id))
        return cmd.model_copy(update=changes)

    async def new_draft(self, lines: list[tuple[str, int]], *, customer_id: str = "C-1") -> dict[str, Any]:
        result = await self.drafts.handle(self.draft_cmd("create_order_draft", {
            "customer_id": customer_id, "lines": [{"sku": sku, "qty": qty} for sku, qty in lines]}))
        assert result.outcome == "succeeded", result
        return result.result

    def prepare_cmd(self, tool: str, arguments: dict[str, Any], *, operation_id: str | None = None,
                    stock_check: str | None = None, **changes: Any) -> PrepareOperationV1:
        args = normalise(tool, arguments)
        cmd = PrepareOperationV1(operation_id=operation_id or self.next("op"), session_id=SESSION,
                                 call_id=self.call_id(), tool=tool, arguments=args,
                                 fingerprint=fingerprint(tool, 1, args), requested_by=self.requester,
                                 stock_check=stock_check, assertion=self.assertion())
        return cmd.model_copy(update=changes)

    async def prepared(self, tool: str, arguments: dict[str, Any], **kw: Any) -> PrepareOperationV1:
        cmd = self.prepare_cmd(tool, arguments, **kw)
        await self.operations.prepare(cmd)
        return cmd

    def grant(self, cmd: PrepareOperationV1, *, pending_id: str | None = None,
              key: Ed25519PrivateKey | None = None, **changes: Any) -> GrantV1:
        unsigned = GrantV1(pending_id=pending_id or self.next("pa"), operation_id=cmd.operation_id,
                           fingerprint=cmd.fingerprint, decided_by="approver", decided_at=NOW)
        return sign_grant(unsigned.model_copy(update=changes), key or self.key)

    async def commit(self, cmd: PrepareOperationV1, grant: GrantV1 | None = None) -> OperationStatusV1:
        grant = grant or self.grant(cmd)
        return await self.operations.commit(CommitOperationV1(operation_id=cmd.operation_id, grant=grant))


@pytest.fixture
def desk(catalog: Catalog) -> Desk:
    return Desk(catalog)
