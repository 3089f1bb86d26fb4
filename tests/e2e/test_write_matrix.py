"""Every write tool × every way an approval ends (approve, reject, cancel, expire), through HTTP, on a
stack where every service runs as two replicas. Each case checks the business effect happened exactly
once, or not at all."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from erpilot.stack import Stack
from tests.e2e.conftest import Api, isolated_stack
from tests.e2e.test_write_flow import decide, draft, finished, request_write

pytestmark = pytest.mark.e2e
TTL_SECONDS = 6
POLICY = "".join(f'[tools.{tool}]\nttl = "{TTL_SECONDS}s"\n'
                 for tool in ("submit_order", "cancel_order", "adjust_stock", "refund_payment"))


@pytest.fixture(scope="module")
def replicated(database_url, tmp_path_factory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("matrix")
    (data_dir / "policy.toml").write_text(POLICY)
    with isolated_stack(database_url, data_dir, {"ERPILOT_POLICY": str(data_dir / "policy.toml")},
                        replicas={"erp": 2, "approval": 2, "agent": 2}) as running:
        yield running


def place_order(requester: Api, decider: Api, session_id: str, sku: str) -> dict:
    revision = draft(requester, session_id, [(sku, 1)], customer="C-1002")
    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    assert decide(decider, pending, "approve").status_code == 200
    return finished(requester, session_id, pending["call_id"])["result"]


def effect_probe(requester: Api, tool: str, subject: dict) -> Callable[[], object]:
    """What the write would change, read back through the ERP views."""
    if tool == "submit_order":
        return lambda: requester.get(f"/v1/erp/drafts/{subject['draft_id']}").json()["status"]
    if tool == "adjust_stock":
        return lambda: requester.get(f"/v1/erp/products/{subject['sku']}").json()["on_hand"]
    return lambda: requester.get(f"/v1/erp/orders/{subject['order_id']}").json()


def arrange(tool: str, requester: Api, decider: Api, session_id: str, sku: str) -> tuple[dict, dict]:
    """Arguments for ``tool`` and the object they act on."""
    if tool == "submit_order":
        revision = draft(requester, session_id, [(sku, 1)], customer="C-1002")
        return {"draft_id": revision["draft_id"], "revision": revision["revision"]}, revision
    if tool == "adjust_stock":
        return {"sku": sku, "delta": 3, "reason": "recount"}, {"sku": sku}
    order = place_order(requester, decider, session_id, sku)
    if tool == "cancel_order":
        return {"order_id": order["order_id"], "reason": "customer request"}, order
    return {"order_id": order["order_id"], "amount_minor": 100, "currency": "EUR", "channel": "original"}, order


@pytest.mark.parametrize("outcome", ["approve", "reject", "cancel", "expire"])
@pytest.mark.parametrize("tool", ["submit_order", "cancel_order", "adjust_stock", "refund_payment"])
def test_every_write_tool_with_every_ending(replicated: Stack, tool: str, outcome: str):
    requester = Api(replicated.base_url, f"req-{time.monotonic_ns()}", "requester")
    decider = Api(replicated.base_url, f"dec-{time.monotonic_ns()}", "approver", "manager")
    sku = {"submit_order": "SKU-PAPER-A4", "cancel_order": "SKU-PEN-BLUE", "adjust_stock": "SKU-STAPLER",
           "refund_payment": "SKU-MARKER-SET"}[tool]
    session_id = requester.new_session()
    arguments, subject = arrange(tool, requester, decider, session_id, sku)
    probe = effect_probe(requester, tool, subject)
    before = probe()

    pending = request_write(requester, session_id, tool, arguments)
    if outcome != "expire":
        response = decide(decider, pending, outcome, comment=f"{outcome} in the matrix")
        assert response.status_code == 200, response.text
    view = finished(requester, session_id, pending["call_id"], timeout=TTL_SECONDS + 20)

    after = probe()
    if outcome == "approve":
        assert view["outcome"] == "succeeded", view
        assert after != before
        assert requester.get(f"/v1/operations/{view['operation_id']}").json()["status"] == "committed"
    else:
        expected_code = {"reject": "rejected", "cancel": "cancelled", "expire": "expired"}[outcome]
        assert (view["outcome"], view["error"]["code"]) == ("not_executed", expected_code)
        assert after == before
        assert requester.get(f"/v1/operations/{view['operation_id']}").json()["status"] == "prepared"
    if tool == "adjust_stock" and outcome == "approve":
        assert after == before + 3
    if tool == "refund_payment" and outcome == "approve":
        assert after["refunded_minor"] == before["refunded_minor"] + 100
    if tool == "cancel_order" and outcome == "approve":
        assert (before["status"], after["status"]) == ("placed", "cancelled")
    if tool == "submit_order" and outcome == "approve":
        assert (before, after) == ("open", "submitted")
