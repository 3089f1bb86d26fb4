from __future__ import annotations

import dataclasses

import pytest

from erpilot_contracts.tools.v1 import WRITE_TOOLS as CATALOG_WRITE_TOOLS
from erpilot_contracts.tools.v1 import InvalidArguments, get_tool
from erpilot_erp.domain.adjust_stock import AdjustStock
from erpilot_erp.domain.cancel_order import CancelOrder
from erpilot_erp.domain.issue_credit_note import IssueCreditNote
from erpilot_erp.domain.operations import NEW_ID_KIND, WRITE_TOOLS, commit, prepare
from erpilot_erp.domain.refund_payment import RefundPayment
from erpilot_erp.domain.submit_order import SubmitOrder
from erpilot_erp.service_layer import to_domain

pytestmark = pytest.mark.unit

REFUND = {"order_id": "O-1", "amount_minor": 10, "currency": "EUR", "channel": "original"}
CREDIT = {"order_id": "O-1", "amount_minor": 10, "currency": "EUR", "reason": "goodwill"}


def test_the_erp_registers_exactly_the_catalogs_write_tools_and_the_ids_they_create():
    assert set(WRITE_TOOLS) == set(CATALOG_WRITE_TOOLS)
    assert dict(NEW_ID_KIND) == {"submit_order": "order", "refund_payment": "refund",
                                 "issue_credit_note": "credit_note"}


def test_each_registered_write_tool_parses_exactly_its_contract_arguments():
    for name, tool in WRITE_TOOLS.items():
        assert tool.name == name == tool.args.tool
        assert {f.name for f in dataclasses.fields(tool.args)} == set(get_tool(name).args.model_fields)


@pytest.mark.parametrize("tool", ["get_product", "create_order_draft", "set_draft_note"])
def test_only_write_tools_are_prepared_or_committed(catalog, tool):
    with pytest.raises(ValueError):
        catalog.prepare(tool, {}, catalog.state(), catalog.now)
    with pytest.raises(ValueError):
        catalog.commit(tool, {}, {}, catalog.state(), catalog.now)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("refund_payment", REFUND | {"amount_minor": 10.0}),
        ("refund_payment", REFUND | {"amount_minor": "10"}),
        ("refund_payment", REFUND | {"channel": "cash"}),
        ("refund_payment", REFUND | {"currency": "eur"}),
        ("adjust_stock", {"sku": "SKU-A", "delta": 0, "reason": "none"}),
        ("cancel_order", {"order_id": "O-1", "force": True}),
        ("submit_order", {"draft_id": "D-1"}),
    ],
)
def test_invalid_arguments_are_refused_before_any_rule_runs(catalog, tool, arguments):
    state = catalog.state(order=catalog.order())
    with pytest.raises(InvalidArguments):
        catalog.prepare(tool, arguments, state, catalog.now)
    with pytest.raises(InvalidArguments):
        catalog.commit(tool, arguments, {}, state, catalog.now, new_id="X-1")


def test_valid_refund_arguments_pass_the_same_gate(catalog):
    assert catalog.prepare("refund_payment", REFUND, catalog.state(order=catalog.order()), catalog.now).facts


def test_the_domain_takes_its_own_plain_writes_not_wire_models(catalog):
    prepared = prepare(AdjustStock(sku="SKU-A", delta=-2, reason="breakage"), catalog.state(), catalog.now)
    assert prepared.facts == {"sku": "SKU-A", "on_hand_before": 12, "on_hand_after": 10}
    plan = commit(AdjustStock(sku="SKU-A", delta=-2, reason="breakage"), prepared.facts, catalog.state(),
                  catalog.now)
    assert plan.result["on_hand"] == 10


def test_a_commit_that_creates_a_record_needs_its_new_id(catalog):
    with pytest.raises(ValueError, match="needs a new refund id"):
        commit(RefundPayment(order_id="O-1", amount_minor=10, currency="EUR", channel="original"), {},
               catalog.state(order=catalog.order()), catalog.now)


def test_the_service_layer_maps_each_write_tool_to_its_domain_write():
    assert to_domain.write("submit_order", {"draft_id": "D-1", "revision": 2}) == SubmitOrder("D-1", 2)
    assert to_domain.write("cancel_order", {"order_id": "O-1"}) == CancelOrder("O-1", None)
    assert to_domain.write("adjust_stock", {"sku": "S", "delta": 3, "reason": "r"}) == AdjustStock("S", 3, "r")
    assert to_domain.write("refund_payment", REFUND) == RefundPayment("O-1", 10, "EUR", "original")
    assert to_domain.write("issue_credit_note", CREDIT) == IssueCreditNote("O-1", 10, "EUR", "goodwill")
