from __future__ import annotations

import pytest

from erpilot_contracts.tools.v1 import InvalidArguments
from erpilot_erp.domain.operations import NEW_ID_KIND, WRITE_TOOLS, commit, prepare

pytestmark = pytest.mark.unit

REFUND = {"order_id": "O-1", "amount_minor": 10, "currency": "EUR", "channel": "original"}


def test_the_four_write_tools_and_the_ids_they_create():
    assert WRITE_TOOLS == {"submit_order", "cancel_order", "adjust_stock", "refund_payment"}
    assert dict(NEW_ID_KIND) == {"submit_order": "order", "refund_payment": "refund"}


@pytest.mark.parametrize("tool", ["get_product", "create_order_draft", "set_draft_note"])
def test_only_write_tools_are_prepared_or_committed(catalog, tool):
    with pytest.raises(ValueError):
        prepare(tool, {}, catalog.state(), catalog.now)
    with pytest.raises(ValueError):
        commit(tool, {}, {}, catalog.state(), catalog.now)


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
        prepare(tool, arguments, state, catalog.now)
    with pytest.raises(InvalidArguments):
        commit(tool, arguments, {}, state, catalog.now, new_id="X-1")


def test_valid_refund_arguments_pass_the_same_gate(catalog):
    assert prepare("refund_payment", REFUND, catalog.state(order=catalog.order()), catalog.now).facts
