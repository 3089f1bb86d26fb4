"""Every tool states the traits the other services read instead of matching its name; a write that lacks one, or
states one that cannot hold, does not build."""

from __future__ import annotations

import dataclasses

import pytest

from erpilot_contracts.tools.v1 import (
    TOOLS,
    WRITE_TOOLS,
    RefundPaymentArgs,
    ResultKind,
    Risk,
    ToolKind,
    ToolSpec,
    Traits,
)

pytestmark = pytest.mark.unit

REFUND = TOOLS["refund_payment"].traits
REQUIRED = ("money_out", "repeat_safe", "object_key", "result_kind", "default_risk", "default_roles", "headline")


def test_every_write_tool_states_every_trait():
    assert set(WRITE_TOOLS) >= {"submit_order", "cancel_order", "adjust_stock", "refund_payment", "issue_credit_note"}
    for name in WRITE_TOOLS:
        traits = TOOLS[name].traits
        assert isinstance(traits, Traits), name
        for trait in REQUIRED:
            assert getattr(traits, trait) not in (None, "", ()), (name, trait)
        assert isinstance(traits.money_out, bool) and isinstance(traits.repeat_safe, bool), name
        assert isinstance(traits.result_kind, ResultKind) and isinstance(traits.default_risk, Risk), name
        assert traits.object_key in TOOLS[name].args.model_fields, name


def test_a_trait_has_no_default_a_tool_without_one_does_not_build():
    assert all(field.default is dataclasses.MISSING for field in dataclasses.fields(Traits))
    with pytest.raises(TypeError):
        Traits(money_out=True, repeat_safe=False, object_key="order_id", result_kind=ResultKind.REFUND,  # type: ignore[call-arg]
               default_risk=Risk.HIGH, default_roles=("manager",), default_amount_rule=None, takes_stock_check=False)


@pytest.mark.parametrize(("change", "complaint"), [
    ({"object_key": None}, "object_key"),
    ({"object_key": "draft_id"}, "not one of its arguments"),
    ({"default_roles": ()}, "approved by default"),
    ({"default_roles": ("requester",)}, "approved by default"),
    ({"default_risk": Risk.LOW}, "never low risk"),
    ({"default_risk": Risk.MEDIUM}, "money out is high risk"),
    ({"headline": ""}, "headline"),
    ({"result_kind": None}, "result_kind is missing"),
])
def test_a_write_with_a_missing_or_impossible_trait_does_not_build(change, complaint):
    with pytest.raises(ValueError, match=complaint):
        ToolSpec("refund_again", ToolKind.WRITE, RefundPaymentArgs, "x", dataclasses.replace(REFUND, **change))


def test_a_write_without_traits_does_not_build():
    with pytest.raises(ValueError, match="traits must be a Traits"):
        ToolSpec("refund_again", ToolKind.WRITE, RefundPaymentArgs, "x", None)  # type: ignore[arg-type]


def test_reads_and_drafts_approve_nothing_and_move_no_money():
    for spec in TOOLS.values():
        if spec.kind is not ToolKind.WRITE:
            assert (spec.traits.default_roles, spec.traits.money_out, spec.traits.default_risk) == ((), False, Risk.LOW)


def test_the_credit_note_is_money_out_for_a_manager_and_never_repeat_safe():
    traits = TOOLS["issue_credit_note"].traits
    assert (traits.money_out, traits.repeat_safe, traits.default_risk) == (True, False, Risk.HIGH)
    assert (traits.default_roles, traits.result_kind, traits.object_key) == (("manager",), ResultKind.CREDIT_NOTE,
                                                                             "order_id")
