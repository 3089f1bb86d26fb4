"""Every write tool × every way an approval ends (approve, reject, cancel, expire), through HTTP, on a
stack where every service runs as two replicas. Each case counts in the ERP's tables that the business
effect happened exactly once (one order per draft, one refund row, one credit note, the stock moved once), or not at
all. The tools are the catalog's write tools: a new one without its case here fails."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from erpilot.stack.stack import Stack
from erpilot_contracts.tools.v1 import WRITE_TOOLS
from erpilot_platform.testing.backends import fetch_sql
from tests.e2e.conftest import Api, isolated_stack
from tests.e2e.test_write_flow import decide, draft, finished, place_order, request_write

pytestmark = pytest.mark.e2e
TTL_SECONDS = 6
POLICY = "".join(f'[tools.{tool}]\nttl = "{TTL_SECONDS}s"\n' for tool in WRITE_TOOLS)


@pytest.fixture(scope="module")
def replicated(database_url, tmp_path_factory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("matrix")
    with isolated_stack(database_url, data_dir, {}, replicas={"erp": 2, "approval": 2, "agent": 2},
                        policy=POLICY) as running:
        yield running


def ledger(stack: Stack, sku: str, subject: dict) -> dict:
    """What the ERP's tables hold about the case, counted there (not through the service's views)."""
    [stock] = fetch_sql(stack.database_url, "select on_hand from erp.products where sku = $1", sku)
    counts = {"on_hand": stock["on_hand"]}
    if "draft_id" in subject:
        [row] = fetch_sql(stack.database_url, "select count(*) as n from erp.orders where draft_id = $1",
                          subject["draft_id"])
        counts["orders_of_draft"] = row["n"]
    if "order_id" in subject:
        [row] = fetch_sql(stack.database_url, "select o.status, o.refunded_minor, "
                          "(select count(*) from erp.refunds r where r.order_id = o.order_id) as refunds, "
                          "(select count(*) from erp.credit_notes c where c.order_id = o.order_id) as credit_notes, "
                          "(select coalesce(sum(c.amount_minor), 0) from erp.credit_notes c "
                          " where c.order_id = o.order_id) as credited_minor "
                          "from erp.orders o where o.order_id = $1", subject["order_id"])
        counts.update(status=row["status"], refunded_minor=row["refunded_minor"], refunds=row["refunds"],
                      credit_notes=row["credit_notes"], credited_minor=int(row["credited_minor"]))
    return counts


# What an approved write changes in the ledger, exactly once (a rejected, cancelled or expired one: nothing).
EFFECTS = {
    "submit_order": {"on_hand": -1, "orders_of_draft": +1},
    "adjust_stock": {"on_hand": +3},
    "cancel_order": {"on_hand": +1, "status": ("placed", "cancelled")},
    "refund_payment": {"refunded_minor": +100, "refunds": +1, "status": ("placed", "placed")},
    "issue_credit_note": {"credited_minor": +100, "credit_notes": +1, "status": ("placed", "placed")},
}
SKUS = {"submit_order": "SKU-PAPER-A4", "cancel_order": "SKU-PEN-BLUE", "adjust_stock": "SKU-STAPLER",
        "refund_payment": "SKU-MARKER-SET", "issue_credit_note": "SKU-NOTEBOOK-A5"}


def expected_after(before: dict, effects: dict) -> dict:
    """A number moves by its delta; a status must go from its first to its second value."""
    after = {}
    for key, change in effects.items():
        if isinstance(change, tuple):
            assert before[key] == change[0], (key, before)
            after[key] = change[1]
        else:
            after[key] = before[key] + change
    return after


def committed_operations(stack: Stack, call_id: str) -> int:
    [row] = fetch_sql(stack.database_url, "select count(*) as n from erp.operations where call_id = $1 "
                      "and status = 'committed'", call_id)
    return row["n"]


def arrange(tool: str, requester: Api, decider: Api, session_id: str, sku: str) -> tuple[dict, dict]:
    """Arguments for ``tool`` and the object they act on."""
    if tool == "submit_order":
        revision = draft(requester, session_id, [(sku, 1)], customer="C-1002")
        return {"draft_id": revision["draft_id"], "revision": revision["revision"]}, revision
    if tool == "adjust_stock":
        return {"sku": sku, "delta": 3, "reason": "recount"}, {"sku": sku}
    order = place_order(requester, decider, session_id, [(sku, 1)], customer="C-1002")
    if tool == "cancel_order":
        return {"order_id": order["order_id"], "reason": "customer request"}, order
    if tool == "issue_credit_note":
        return {"order_id": order["order_id"], "amount_minor": 100, "currency": "EUR", "reason": "late delivery"}, order
    assert tool == "refund_payment", f"no matrix case for the write tool {tool}"
    return {"order_id": order["order_id"], "amount_minor": 100, "currency": "EUR", "channel": "original"}, order


@pytest.mark.parametrize("outcome", ["approve", "reject", "cancel", "expire"])
@pytest.mark.parametrize("tool", WRITE_TOOLS)
def test_every_write_tool_with_every_ending(replicated: Stack, tool: str, outcome: str):
    requester = Api(replicated.base_url, f"req-{time.monotonic_ns()}", "requester")
    decider = Api(replicated.base_url, f"dec-{time.monotonic_ns()}", "approver", "manager")
    sku = SKUS[tool]
    session_id = requester.new_session()
    arguments, subject = arrange(tool, requester, decider, session_id, sku)
    before = ledger(replicated, sku, subject)

    pending = request_write(requester, session_id, tool, arguments)
    if outcome != "expire":
        response = decide(decider, pending, outcome, comment=f"{outcome} in the matrix")
        assert response.status_code == 200, response.text
    view = finished(requester, session_id, pending["call_id"], timeout=TTL_SECONDS + 20)

    after = ledger(replicated, sku, subject)
    if outcome == "approve":
        assert view["outcome"] == "succeeded", view
        assert requester.get(f"/v1/operations/{view['operation_id']}").json()["status"] == "committed"
        assert after == {**before, **expected_after(before, EFFECTS[tool])}  # each effect once, nothing else
        assert committed_operations(replicated, pending["call_id"]) == 1
    else:
        expected_code = {"reject": "rejected", "cancel": "cancelled", "expire": "expired"}[outcome]
        assert (view["outcome"], view["error"]["code"]) == ("not_executed", expected_code)
        assert after == before
        assert requester.get(f"/v1/operations/{view['operation_id']}").json()["status"] == "prepared"
        assert committed_operations(replicated, pending["call_id"]) == 0
