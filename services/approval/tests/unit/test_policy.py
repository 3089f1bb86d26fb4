"""Policy parsing, defaults, key-by-key merge and error messages (SPEC §6)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_approval.domain.approvals import risk_of
from erpilot_approval.domain.policy import AmountRule, PolicyError, load_policy
from erpilot_approval.service_layer.mapping import policy_view
from erpilot_contracts.tools.v1 import TOOLS, ToolKind

pytestmark = pytest.mark.unit


def test_defaults_allow_reads_and_drafts_and_guard_writes() -> None:
    policy = load_policy(None)
    for name, spec in TOOLS.items():
        expected = "require_approval" if spec.kind is ToolKind.WRITE else "allow"
        assert policy.for_tool(name).action == expected, name
        assert policy.for_tool(name).ttl == timedelta(minutes=15), name
    assert policy.for_tool("submit_order").roles == ("approver", "manager")
    assert policy.for_tool("submit_order").rules == (AmountRule(1_000_000, ("manager",)),)
    assert policy.for_tool("submit_order").stock_check == "exact"
    assert policy.for_tool("cancel_order").roles == ("approver",)
    assert policy.for_tool("adjust_stock").roles == ("manager",)
    assert policy.for_tool("refund_payment").roles == ("manager",)
    assert policy.for_tool("issue_credit_note").roles == ("manager",)


def test_every_write_tools_defaults_are_its_catalog_traits() -> None:
    policy = load_policy(None)
    for name, spec in TOOLS.items():
        if spec.kind is not ToolKind.WRITE:
            continue
        tool = policy.for_tool(name)
        assert tool.roles == spec.traits.default_roles, name
        rule = spec.traits.default_amount_rule
        assert tool.rules == ((AmountRule(*rule),) if rule else ()), name
        assert (tool.stock_check is not None) == spec.traits.takes_stock_check, name
        assert tool.separation_of_duties is True, name


def test_risk_is_the_tools_default_risk_raised_by_a_large_amount() -> None:
    assert risk_of("issue_credit_note", 100) == risk_of("refund_payment", None) == "high"  # money out
    assert risk_of("cancel_order", 100) == risk_of("adjust_stock", None) == "medium"
    assert risk_of("cancel_order", 1_000_000) == "high"
    assert risk_of("get_order", None) == risk_of("no_such_tool", None) == "low"


def test_separation_of_duties_is_the_default_for_every_write_tool_and_a_policy_may_turn_it_off() -> None:
    defaults = load_policy(None)
    writes = [name for name, spec in TOOLS.items() if spec.kind is ToolKind.WRITE]
    assert writes and all(defaults.for_tool(name).separation_of_duties is True for name in writes)

    relaxed = load_policy("[tools.cancel_order]\nseparation_of_duties = false\n")
    assert relaxed.for_tool("cancel_order").separation_of_duties is False
    assert all(relaxed.for_tool(name).separation_of_duties for name in writes if name != "cancel_order")
    assert relaxed.version != defaults.version  # another policy in force, shown as such


def test_empty_text_is_the_defaults() -> None:
    assert load_policy("") == load_policy(None)
    assert load_policy("").version == load_policy(None).version


def test_a_table_that_sets_only_ttl_keeps_the_default_roles_and_rules() -> None:
    policy = load_policy('[tools.submit_order]\nttl = "2s"\n')
    submit = policy.for_tool("submit_order")
    assert submit.ttl == timedelta(seconds=2)
    assert submit.roles == ("approver", "manager")
    assert submit.action == "require_approval"
    assert submit.rules == (AmountRule(1_000_000, ("manager",)),)
    assert policy.for_tool("cancel_order").ttl == timedelta(minutes=15)


def test_defaults_ttl_applies_to_tools_that_do_not_set_their_own() -> None:
    policy = load_policy('[defaults]\nttl = "24h"\n[tools.cancel_order]\nttl = "90s"\n')
    assert policy.for_tool("submit_order").ttl == timedelta(hours=24)
    assert policy.for_tool("cancel_order").ttl == timedelta(seconds=90)


def test_file_values_replace_defaults() -> None:
    policy = load_policy(
        "[tools.refund_payment]\nseparation_of_duties = false\nroles = ['admin', 'manager']\n"
        "[tools.get_product]\naction = 'deny'\n"
        "[tools.submit_order]\nstock_check = 'sufficient'\nrules = []\n"
    )
    assert policy.for_tool("refund_payment").separation_of_duties is False
    assert policy.for_tool("refund_payment").roles == ("manager", "admin")
    assert policy.for_tool("get_product").action == "deny"
    assert policy.for_tool("submit_order").stock_check == "sufficient"
    assert policy.required_roles("submit_order", 5_000_000) == ["approver", "manager"]


def test_unknown_tool_is_denied() -> None:
    policy = load_policy(None)
    assert policy.for_tool("drop_database").action == "deny"
    assert policy.required_roles("drop_database", 1) == []
    assert policy_view(policy, "drop_database").tools[0].action == "deny"


def test_amount_rules_raise_the_required_roles_and_the_highest_match_wins() -> None:
    default = load_policy(None)
    assert default.required_roles("submit_order", None) == ["approver", "manager"]
    assert default.required_roles("submit_order", 999_999) == ["approver", "manager"]
    assert default.required_roles("submit_order", 1_000_000) == ["manager"]

    tiered = load_policy(
        "[[tools.refund_payment.rules]]\nmin_amount_minor = 50000\nroles = ['admin']\n"
        "[[tools.refund_payment.rules]]\nmin_amount_minor = 1000\nroles = ['approver', 'manager']\n"
    )
    assert tiered.required_roles("refund_payment", 999) == ["manager"]
    assert tiered.required_roles("refund_payment", 1000) == ["approver", "manager"]
    assert tiered.required_roles("refund_payment", 49_999) == ["approver", "manager"]
    assert tiered.required_roles("refund_payment", 50_000) == ["admin"]


def test_version_is_stable_and_tracks_the_merged_policy() -> None:
    default = load_policy(None)
    assert default.version.startswith("sha256:") and len(default.version) == len("sha256:") + 16
    # Restating a default does not change the merged policy, so not its version either.
    assert load_policy('[defaults]\nttl = "15m"\n').version == default.version
    assert load_policy("[tools.cancel_order]\nroles = ['approver', 'approver']\n").version == default.version
    assert load_policy('[tools.cancel_order]\nttl = "16m"\n').version != default.version


def test_view_lists_every_tool_with_ttl_seconds() -> None:
    view = policy_view(load_policy(None))
    assert [item.tool for item in view.tools] == list(TOOLS)
    submit = next(item for item in view.tools if item.tool == "submit_order")
    assert (submit.action, submit.roles) == ("require_approval", ["approver", "manager"])
    assert submit.ttl_seconds == 900


@pytest.mark.parametrize(
    ("text", "message_start"),
    [
        ('[tools.submit_order]\nttl = "5 minutes"\n',
         "tools.submit_order.ttl: expected a duration like '15m', got '5 minutes'"),
        ("[tools.submit_order]\nttl = 15\n", "tools.submit_order.ttl: expected a duration"),
        ('[tools.submit_order]\nttl = "0s"\n', "tools.submit_order.ttl: expected a duration"),
        ('[tools.submit_order]\nttl = "1d"\n', "tools.submit_order.ttl: expected a duration"),
        ('[tools.submit_order]\nttl = "9000h"\n', "tools.submit_order.ttl: at most"),
        ('[defaults]\nttl = "soon"\n', "defaults.ttl: expected a duration"),
        ("[defaults]\nroles = []\n", "defaults.roles: unknown key"),
        ("[tools.launch_rocket]\naction = 'allow'\n", "tools.launch_rocket: unknown tool"),
        ("[tools.submit_order]\ncolour = 'red'\n", "tools.submit_order.colour: unknown key"),
        ("[tools.submit_order]\naction = 'maybe'\n", "tools.submit_order.action: expected one of"),
        ("[tools.submit_order]\naction = true\n", "tools.submit_order.action: expected one of"),
        ("[tools.submit_order]\nroles = ['boss']\n", "tools.submit_order.roles[0]: unknown role 'boss'"),
        ("[tools.submit_order]\nroles = 'manager'\n", "tools.submit_order.roles: expected a list"),
        ("[tools.submit_order]\nroles = []\n", "tools.submit_order.roles: require_approval needs"),
        ("[tools.get_product]\naction = 'require_approval'\n", "tools.get_product.roles: require_approval"),
        ("[tools.refund_payment]\nseparation_of_duties = 'yes'\n",
         "tools.refund_payment.separation_of_duties: expected true or false"),
        ("[tools.cancel_order]\nstock_check = 'exact'\n", "tools.cancel_order.stock_check: only"),
        ("[tools.submit_order]\nstock_check = 'loose'\n", "tools.submit_order.stock_check: expected one of"),
        ("[tools.submit_order]\nrules = 5\n", "tools.submit_order.rules: expected a list"),
        ("[tools.submit_order]\nrules = [5]\n", "tools.submit_order.rules[0]: expected a table"),
        ("[[tools.submit_order.rules]]\nroles = ['manager']\n",
         "tools.submit_order.rules[0].min_amount_minor: missing"),
        ("[[tools.submit_order.rules]]\nmin_amount_minor = 1\n",
         "tools.submit_order.rules[0].roles: missing"),
        ("[[tools.submit_order.rules]]\nmin_amount_minor = '1'\nroles = ['manager']\n",
         "tools.submit_order.rules[0].min_amount_minor: expected an integer >= 0"),
        ("[[tools.submit_order.rules]]\nmin_amount_minor = true\nroles = ['manager']\n",
         "tools.submit_order.rules[0].min_amount_minor: expected an integer >= 0"),
        ("[[tools.submit_order.rules]]\nmin_amount_minor = 1.5\nroles = ['manager']\n",
         "tools.submit_order.rules[0].min_amount_minor: expected an integer >= 0"),
        ("[[tools.submit_order.rules]]\nmin_amount_minor = 1\nroles = []\n",
         "tools.submit_order.rules[0].roles: expected at least one role"),
        ("[[tools.submit_order.rules]]\nmin_amount_minor = 1\nroles = ['manager']\nextra = 1\n",
         "tools.submit_order.rules[0].extra: unknown key"),
        ("[[tools.submit_order.rules]]\nmin_amount_minor = 1\nroles = ['manager']\n"
         "[[tools.submit_order.rules]]\nmin_amount_minor = 1\nroles = ['admin']\n",
         "tools.submit_order.rules[1].min_amount_minor: threshold 1 appears twice"),
        ("tools = 3\n", "tools: expected a table"),
        ("[tools]\nsubmit_order = 'deny'\n", "tools.submit_order: expected a table"),
        ("[tool.submit_order]\nttl = '1m'\n", "tool: unknown key"),
        ("[tools.submit_order\n", "policy: not valid TOML"),
    ],
)
def test_every_policy_error_names_its_key(text: str, message_start: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(text)
    assert str(caught.value).startswith(message_start), str(caught.value)
