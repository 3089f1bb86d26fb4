"""The same repository cases against both ledgers: in memory (``services/erp/tests/fakes.py``, what the unit tests
run on) and in PostgreSQL (``adapters.ledger``, on the session's database). A fake that drifts from the SQL one
would make the unit tests prove things about a ledger that does not exist.

Every case goes through the unit of work as the use cases do (``run`` for changes, ``read`` for looks) and uses
fresh keys, so the SQL half shares the session's seeded database with the other tests.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from erpilot_erp.adapters.ledger import ledger as sql_ledger
from erpilot_erp.adapters.repository import StaleWrite
from erpilot_erp.adapters.tables import customers, products
from erpilot_erp.domain.issue_credit_note import NewCreditNote
from erpilot_erp.domain.model import CreditNote, Customer, DraftLine, DraftRevision, Order, OrderLine, Product
from erpilot_erp.domain.plans import CommitPlan, NewOrder, OrderChange, Rows, StockChange
from erpilot_erp.service_layer.ports import NewOperation, Outcome
from erpilot_platform.db import create_engine, is_unique_violation
from services.erp.tests.fakes import LedgerState, memory_ledger

pytestmark = pytest.mark.integration
NOW = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


class Harness:
    """A ledger and how to put catalog rows into it (the repository has no use case that creates them)."""

    def __init__(self, uow, add_product, add_customer):
        self.uow, self._add_product, self._add_customer = uow, add_product, add_customer
        self.tag = uuid.uuid4().hex[:10].upper()

    async def product(self, name: str = "Widget", *, on_hand: int = 10, price_minor: int = 500) -> Product:
        product = Product(f"SKU-R-{self.tag}-{uuid.uuid4().hex[:6]}", f"{name} {self.tag}", "active", price_minor,
                          "EUR", on_hand)
        await self._add_product(product)
        return product

    async def customer(self, name: str = "Customer") -> Customer:
        customer = Customer(f"C-R-{uuid.uuid4().hex[:10]}", f"{name} {self.tag}", 5)
        await self._add_customer(customer)
        return customer

    async def run(self, work):
        return await self.uow.run(work)

    async def read(self, work):
        return await self.uow.read(work)


@pytest.fixture(params=["memory", "sql"])
def database(request) -> str | None:
    """None for the memory ledger, else the session's migrated database (resolved outside the event loop)."""
    return None if request.param == "memory" else request.getfixturevalue("database_url")


@pytest.fixture
async def ledger(database):
    if database is None:
        uow = memory_ledger(LedgerState())

        async def add_product(product: Product) -> None:  # into what is committed
            uow.state.products[product.sku] = product

        async def add_customer(customer: Customer) -> None:
            uow.state.customers[customer.customer_id] = customer

        yield Harness(uow, add_product, add_customer)
        return
    engine = create_engine(database, pool_size=2, application_name="erp-repo-tests")

    async def insert_product(product: Product) -> None:
        async with engine.begin() as conn:
            await conn.execute(products.insert().values(
                sku=product.sku, name=product.name, status=product.status, price_minor=product.price_minor,
                currency=product.currency, on_hand=product.on_hand))

    async def insert_customer(customer: Customer) -> None:
        async with engine.begin() as conn:
            await conn.execute(customers.insert().values(customer_id=customer.customer_id, name=customer.name,
                                                         discount_pct=customer.discount_pct))

    yield Harness(sql_ledger(engine), insert_product, insert_customer)
    await engine.dispose()


def revision(draft_id: str, number: int, customer: Customer, product: Product, *, qty: int = 1,
             session_id: str = "S-repo") -> DraftRevision:
    line = DraftLine(1, product.sku, product.name, qty, product.price_minor, 0, qty * product.price_minor,
                     product.on_hand)
    return DraftRevision(draft_id=draft_id, revision=number, session_id=session_id, customer_id=customer.customer_id,
                         customer_name=customer.name, lines=(line,), total_amount_minor=line.line_total_minor,
                         currency="EUR", note=f"rev {number}", valid_until=NOW + timedelta(days=1),
                         created_at=NOW + timedelta(minutes=number))


def new_operation(operation_id: str, **changes) -> NewOperation:
    values = dict(operation_id=operation_id, tool="adjust_stock", tool_schema_version=1, session_id="S-repo",
                  call_id=f"call-{operation_id}", requested_by="tester", assertion="a.b.c", asserted_at=NOW,
                  supersedes=None, arguments={"sku": "SKU-X", "delta": 1, "reason": "x"}, fingerprint="sha256:1",
                  facts={"on_hand_before": 3}, preview={"operation": "Adjust stock"}, prepared_at=NOW)
    return NewOperation(**{**values, **changes})


async def test_ids_are_new_each_time_with_their_prefix(ledger):
    first, second = await ledger.run(lambda unit: _two_ids(unit))

    assert first.startswith("D-") and second.startswith("D-") and int(second[2:]) > int(first[2:])
    assert (await ledger.run(lambda unit: unit.ledger.next_id("order"))).startswith("O-")


async def _two_ids(unit):
    return await unit.ledger.next_id("draft"), await unit.ledger.next_id("draft")


async def test_catalog_lookups_and_searches(ledger):
    widget, gadget = await ledger.product("Blue Widget"), await ledger.product("Gadget")
    customer = await ledger.customer("Straße Bau")

    found = await ledger.read(lambda unit: unit.ledger.products_by_sku([gadget.sku, "SKU-NONE", widget.sku]))
    by_name = await ledger.read(lambda unit: unit.ledger.search_products(f" blue WIDGET {ledger.tag.lower()} "))
    by_id = await ledger.read(lambda unit: unit.ledger.search_customers(customer.customer_id.lower()))

    assert found == {gadget.sku: gadget, widget.sku: widget} and list(found) == sorted(found)
    assert by_name == [widget]
    assert by_id == [customer]
    assert await ledger.read(lambda unit: unit.ledger.customer(customer.customer_id)) == customer
    assert await ledger.read(lambda unit: unit.ledger.customer("C-NONE")) is None


async def test_revisions_are_stored_in_order_and_read_back_as_written(ledger):
    customer, product = await ledger.customer(), await ledger.product()
    draft_id = await ledger.run(lambda unit: unit.ledger.next_id("draft"))
    first = revision(draft_id, 1, customer, product)
    second = revision(draft_id, 2, customer, product, qty=3)

    await ledger.run(lambda unit: unit.ledger.insert_revision(first, operation_id=f"op-{draft_id}-1"))
    await ledger.run(lambda unit: unit.ledger.insert_revision(second, operation_id=f"op-{draft_id}-2"))

    assert await ledger.read(lambda unit: unit.ledger.latest_draft(draft_id)) == second
    assert await ledger.run(lambda unit: unit.ledger.latest_draft(draft_id, lock=True)) == second
    latest = await ledger.read(lambda unit: unit.ledger.draft_revision(draft_id, None))
    older = await ledger.read(lambda unit: unit.ledger.draft_revision(draft_id, 1))
    assert (latest.revision, latest.latest_revision) == (second, 2)
    assert (older.revision, older.latest_revision) == (first, 2)
    assert await ledger.read(lambda unit: unit.ledger.draft_revision(draft_id, 3)) is None
    assert await ledger.read(lambda unit: unit.ledger.draft_revision("D-NONE", None)) is None
    assert await ledger.read(lambda unit: unit.ledger.open_drafts("S-repo-other")) == []
    assert second in await ledger.read(lambda unit: unit.ledger.open_drafts("S-repo"))


async def test_a_revision_that_does_not_follow_the_latest_is_a_stale_write_and_leaves_nothing(ledger):
    customer, product = await ledger.customer(), await ledger.product()
    draft_id = await ledger.run(lambda unit: unit.ledger.next_id("draft"))
    first = revision(draft_id, 1, customer, product)
    await ledger.run(lambda unit: unit.ledger.insert_revision(first, operation_id="x1"))

    with pytest.raises(StaleWrite):
        await ledger.run(lambda unit: unit.ledger.insert_revision(revision(draft_id, 3, customer, product),
                                                                  operation_id=f"op-{draft_id}-3"))
    assert (await ledger.read(lambda unit: unit.ledger.draft_revision(draft_id, None))).latest_revision == 1


async def test_an_operation_is_stored_finished_once_and_its_grant_used_once(ledger):
    operation_id = f"op-repo-{uuid.uuid4().hex}"
    stored = await ledger.run(lambda unit: unit.ledger.insert_operation(new_operation(operation_id)))
    assert (stored.status, stored.requested_by, stored.assertion, stored.asserted_at, stored.prepared_at) == (
        "prepared", "tester", "a.b.c", NOW, NOW)
    assert await ledger.read(lambda unit: unit.ledger.operation(operation_id)) == stored

    outcome = Outcome("committed", f"pa-{operation_id}", "approver", result={"ok": 1})
    done = await ledger.run(lambda unit: unit.ledger.finish_operation(operation_id, outcome))
    assert (done.status, done.result, done.grant_pending_id, done.decided_by) == (
        "committed", {"ok": 1}, f"pa-{operation_id}", "approver")
    assert done.committed_at is not None
    with pytest.raises(StaleWrite):
        await ledger.run(lambda unit: unit.ledger.finish_operation(operation_id, outcome))

    assert await ledger.run(lambda unit: unit.ledger.consume_grant(f"pa-{operation_id}", operation_id)) is True
    assert await ledger.run(lambda unit: unit.ledger.consume_grant(f"pa-{operation_id}", operation_id)) is False
    assert await ledger.run(lambda unit: unit.ledger.consume_grant(f"pa-other-{operation_id}", operation_id)) is False
    assert await ledger.read(lambda unit: unit.ledger.operation(f"{operation_id}-none")) is None


async def test_a_call_has_one_first_operation_and_edits_beside_it(ledger):
    """uq_operations_call (migration 0004): a second first version of one call is refused by the database itself,
    even when two prepares race past the service's look; an edit (supersedes) is a new version of the same call."""
    first = new_operation(f"op-repo-{uuid.uuid4().hex}")
    await ledger.run(lambda unit: unit.ledger.insert_operation(first))
    assert (await ledger.read(lambda unit: unit.ledger.operation_for_call("S-repo", first.call_id))).operation_id == (
        first.operation_id)

    second = replace(first, operation_id=f"{first.operation_id}-2", arguments={"sku": "SKU-X", "delta": -9})
    with pytest.raises(Exception) as refused:  # noqa: PT011 - the unique index's refusal, asyncpg's or SQLAlchemy's
        await ledger.run(lambda unit: unit.ledger.insert_operation(second))
    assert isinstance(refused.value, StaleWrite) or is_unique_violation(refused.value)
    edit = replace(second, operation_id=f"{first.operation_id}-e", supersedes=first.operation_id)
    await ledger.run(lambda unit: unit.ledger.insert_operation(edit))
    assert (await ledger.read(lambda unit: unit.ledger.operation_for_call("S-repo", first.call_id))).operation_id == (
        first.operation_id)
    assert await ledger.read(lambda unit: unit.ledger.operation(second.operation_id)) is None


async def test_a_plan_whose_stock_moved_is_a_stale_write_and_applies_nothing(ledger):
    product = await ledger.product(on_hand=10)
    moved = CommitPlan(result={}, effects=(StockChange(product.sku, 9, 7),))
    good = CommitPlan(result={}, effects=(StockChange(product.sku, 10, 7),))

    with pytest.raises(StaleWrite):
        await ledger.run(lambda unit: unit.ledger.apply_plan(moved, operation_id="op-x"))
    assert (await ledger.read(lambda unit: unit.ledger.products_by_sku([product.sku])))[product.sku].on_hand == 10
    await ledger.run(lambda unit: unit.ledger.apply_plan(good, operation_id="op-y"))
    assert (await ledger.read(lambda unit: unit.ledger.products_by_sku([product.sku])))[product.sku].on_hand == 7


async def test_an_order_a_plan_places_reads_back_as_placed_and_an_update_changes_its_status_and_refund(ledger):
    customer, product = await ledger.customer(), await ledger.product(on_hand=10)
    order_id = await ledger.run(lambda unit: unit.ledger.next_id("order"))
    line = OrderLine(product.sku, product.name, 2, product.price_minor, 2 * product.price_minor)
    placed = Order(order_id, customer.customer_id, customer.name, "placed", (line,), line.line_total_minor, "EUR",
                   line.line_total_minor, 0, NOW, draft_id="D-repo", revision=3, session_id="S-repo")
    place = CommitPlan(result={}, effects=(StockChange(product.sku, 10, 8), NewOrder(placed)))
    await ledger.run(lambda unit: unit.ledger.apply_plan(place, operation_id=f"op-{order_id}"))

    assert await ledger.read(lambda unit: unit.ledger.order(order_id)) == placed
    refunded = replace(placed, status="cancelled", refunded_minor=placed.paid_minor)
    cancel = CommitPlan(result={}, effects=(OrderChange(refunded),))
    await ledger.run(lambda unit: unit.ledger.apply_plan(cancel, operation_id=f"op-{order_id}-c"))
    assert await ledger.run(lambda unit: unit.ledger.order(order_id, lock=True)) == refunded
    assert await ledger.read(lambda unit: unit.ledger.order("O-NONE")) is None


async def test_the_answer_recorded_under_a_claimed_key_is_what_every_later_claim_finds(ledger):
    key = f"cmd-{uuid.uuid4().hex}"

    async def first(unit):
        claimed = await unit.claim(key)
        await unit.record(key, {"ok": True, "data": {"order_id": "O-1"}})
        return claimed

    assert await ledger.run(first) == (True, None)
    assert await ledger.run(lambda unit: unit.claim(key)) == (False, {"ok": True, "data": {"order_id": "O-1"}})
    assert await ledger.run(lambda unit: unit.claim(key)) == (False, {"ok": True, "data": {"order_id": "O-1"}})
    assert await ledger.run(lambda unit: unit.claim(f"{key}-unanswered")) == (True, None)
    assert await ledger.run(lambda unit: unit.claim(f"{key}-unanswered")) == (False, None)  # claimed, never answered


async def test_a_product_change_returns_the_product_and_an_unknown_one_nothing(ledger):
    product = await ledger.product(price_minor=500)

    changed = await ledger.run(lambda unit: unit.ledger.update_product(product.sku, {"price_minor": 650}))

    assert changed == replace(product, price_minor=650)
    assert await ledger.run(lambda unit: unit.ledger.update_product("SKU-NONE", {"price_minor": 1})) is None


async def test_a_unit_of_work_that_raises_leaves_no_row_no_message_and_no_inbox_answer(ledger):
    product = await ledger.product(price_minor=500)

    async def work(unit):
        await unit.ledger.update_product(product.sku, {"price_minor": 1})
        await unit.claim(f"key-{product.sku}")
        await unit.emit("erpilot.v1.evt.erp.probe", {"sku": product.sku}, msg_id=f"probe-{product.sku}")
        raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        await ledger.run(work)

    assert (await ledger.read(lambda unit: unit.ledger.products_by_sku([product.sku])))[product.sku].price_minor == 500
    assert await ledger.run(lambda unit: unit.claim(f"key-{product.sku}")) == (True, None)


async def test_credit_notes_a_plan_issues_read_back_per_order_with_their_own_ids(ledger):
    customer, product = await ledger.customer(), await ledger.product(on_hand=10)
    order_id = await ledger.run(lambda unit: unit.ledger.next_id("order"))
    line = OrderLine(product.sku, product.name, 1, product.price_minor, product.price_minor)
    placed = Order(order_id, customer.customer_id, customer.name, "placed", (line,), line.line_total_minor, "EUR",
                   line.line_total_minor, 0, NOW)
    await ledger.run(lambda unit: unit.ledger.apply_plan(CommitPlan(result={}, effects=(NewOrder(placed),)),
                                                         operation_id=f"op-{order_id}"))
    assert await ledger.read(lambda unit: unit.ledger.row_set(Rows.ORDER_CREDIT_NOTES, order_id)) == []

    first = await ledger.run(lambda unit: unit.ledger.next_id("credit_note"))
    second = await ledger.run(lambda unit: unit.ledger.next_id("credit_note"))
    assert first.startswith("CN-") and second.startswith("CN-") and first != second
    notes = [CreditNote(first, order_id, 100, "EUR", "late", 400, NOW),
             CreditNote(second, order_id, 150, "EUR", "damaged", 250, NOW + timedelta(seconds=1))]
    for index, note in enumerate(notes):
        plan = CommitPlan(result={}, effects=(NewCreditNote(note),))
        await ledger.run(lambda unit, plan=plan, index=index: unit.ledger.apply_plan(
            plan, operation_id=f"op-{first}-{index}"))
    assert await ledger.run(lambda unit: unit.ledger.row_set(Rows.ORDER_CREDIT_NOTES, order_id)) == notes
    assert await ledger.read(lambda unit: unit.ledger.row_set(Rows.ORDER_CREDIT_NOTES, "O-NONE")) == []
