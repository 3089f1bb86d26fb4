"""What MCP clients are shown (no I/O): the policy decides what is listed and what says it needs
approval; annotations follow the tool's kind; the JSON-RPC id never becomes a call_id."""

from __future__ import annotations

import pytest

from erpilot_contracts.tools.v1 import TOOLS
from erpilot_gateway.mcp_server.catalogue import STATUS_TOOL, mcp_tools
from erpilot_gateway.mcp_server.identity import (
    IDEMPOTENCY_META,
    SESSION_META,
    InvalidMeta,
    call_id_for,
    derived_session_id,
    named_session_id,
)

pytestmark = pytest.mark.unit


def items(actions: dict[str, str]) -> list[dict]:
    return [{"name": spec.name, "kind": spec.kind.value, "schema_version": 1, "description": spec.description,
             "input_schema": spec.input_schema(),
             "policy": {"action": actions.get(spec.name, "allow"), "roles": ["manager"], "ttl": "15m"}}
            for spec in TOOLS.values()]


def test_denied_tools_are_not_listed_and_gated_ones_say_so():
    tools = {t.name: t for t in mcp_tools(items({"refund_payment": "deny", "adjust_stock": "require_approval"}))}

    assert "refund_payment" not in tools
    assert set(tools) == (set(TOOLS) - {"refund_payment"}) | {STATUS_TOOL}
    assert "Needs approval by one of: manager (expires after 15m)" in tools["adjust_stock"].description
    assert tools["adjust_stock"].meta["erpilot.dev/policy"]["requires_approval"] is True
    assert "Needs approval" not in tools["get_product"].description
    assert tools["get_product"].meta["erpilot.dev/policy"]["requires_approval"] is False
    assert tools["get_product"].input_schema == TOOLS["get_product"].input_schema()


def test_annotations_follow_the_kind_and_what_a_repeat_does():
    tools = {t.name: t.annotations for t in mcp_tools(items({}))}

    assert tools["search_products"].read_only_hint and tools["search_products"].idempotent_hint
    assert not tools["create_order_draft"].destructive_hint and not tools["create_order_draft"].idempotent_hint
    assert tools["update_draft_line"].idempotent_hint  # bound to base_revision: a repeat fails draft_changed
    for write in ("submit_order", "cancel_order", "adjust_stock", "refund_payment"):
        assert tools[write].destructive_hint and not tools[write].read_only_hint
    assert not tools["refund_payment"].idempotent_hint and not tools["adjust_stock"].idempotent_hint
    assert tools[STATUS_TOOL].read_only_hint


def test_hints_and_meta_are_the_tools_catalog_traits():
    tools = {t.name: t for t in mcp_tools(items({}))}
    for name, spec in TOOLS.items():
        assert tools[name].annotations.idempotent_hint is spec.traits.repeat_safe, name
        meta = tools[name].meta["erpilot.dev/policy"]
        assert (meta["money_out"], meta["risk"]) == (spec.traits.money_out, spec.traits.default_risk.value), name
    credit = tools["issue_credit_note"]
    assert credit.annotations.destructive_hint and not credit.annotations.idempotent_hint
    assert credit.meta["erpilot.dev/policy"]["money_out"] is True


def test_sessions_are_per_subject_and_connection():
    assert derived_session_id("alice", "session:1") == derived_session_id("alice", "session:1")
    assert derived_session_id("alice", "session:1") != derived_session_id("bob", "session:1")
    assert derived_session_id("alice", "session:1") != derived_session_id("alice", "session:2")
    assert named_session_id({SESSION_META: "ses_abc"}) == "ses_abc" and named_session_id(None) is None
    with pytest.raises(InvalidMeta):
        named_session_id({SESSION_META: 42})


def test_a_call_id_comes_from_the_idempotency_key_within_the_session_or_is_fresh():
    keyed = call_id_for("ses_1", {IDEMPOTENCY_META: "k1"})
    assert keyed == call_id_for("ses_1", {IDEMPOTENCY_META: "k1"})
    assert keyed != call_id_for("ses_2", {IDEMPOTENCY_META: "k1"})
    assert call_id_for("ses_1", None) != call_id_for("ses_1", None)
    assert call_id_for("ses_1", {"progressToken": 7}).startswith("mcp_")
    for bad in ("", "x" * 101, "a b", 5):
        with pytest.raises(InvalidMeta):
            call_id_for("ses_1", {IDEMPOTENCY_META: bad})
