"""The offline rules planner: commands to tool calls, multi-step flows, final summaries."""

from __future__ import annotations

import pytest

from erpilot_agent.domain.history import assistant_message, system_message, tool_message, user_message
from erpilot_agent.domain.money import InvalidAmount, format_minor, parse_amount_minor
from erpilot_agent.domain.rules_planner import HELP, PlannerReply, plan

pytestmark = pytest.mark.unit

DRAFT = {"draft_id": "D-1002", "revision": 3, "customer_id": "C-7", "customer_name": "Acme Trading Ltd",
         "currency": "EUR", "total_amount_minor": 4200,
         "lines": [{"item_number": 1, "sku": "SKU-9", "qty": 2}]}


def ask(text: str, *before: dict) -> list[dict]:
    return [system_message("rules"), *before, user_message(text)]


def only_call(reply: PlannerReply) -> dict:
    assert reply.text is None and len(reply.tool_calls) == 1, reply
    return reply.tool_calls[0]


def after(history: list[dict], reply: PlannerReply, content: dict) -> list[dict]:
    """The history once the agent stored the planner's call and the tool's result."""
    called = only_call(reply)
    return [*history, assistant_message(None, [called]), tool_message(called["id"], content)]


def ok(result: dict) -> dict:
    return {"status": "succeeded", "result": result}


@pytest.mark.parametrize(("text", "tool", "arguments"), [
    ("find customer acme", "search_customers", {"query": "acme"}),
    ("FIND CUSTOMER Acme Ltd", "search_customers", {"query": "Acme Ltd"}),
    ("find product", "search_products", {"query": ""}),
    ("find products bolt", "search_products", {"query": "bolt"}),
    ("show product SKU-9", "get_product", {"sku": "SKU-9"}),
    ("Show Order O-17", "get_order", {"order_id": "O-17"}),
    ("show task", "get_order_task", {}),
    ("show draft D-1002", "get_draft", {"draft_id": "D-1002"}),
    ("show draft D-1002 revision 2", "get_draft", {"draft_id": "D-1002", "revision": 2}),
    ("show draft D-1002 lines 301-350", "get_draft", {"draft_id": "D-1002", "offset": 300, "limit": 50}),
    ("show draft D-1002 revision 2 line 17", "get_draft", {"draft_id": "D-1002", "revision": 2, "offset": 16,
                                                           "limit": 1}),
    ("draft for C-7: SKU-9 x2, SKU-10 x15", "create_order_draft",
     {"customer_id": "C-7", "lines": [{"sku": "SKU-9", "qty": 2}, {"sku": "SKU-10", "qty": 15}]}),
    ("Draft for C-7: SKU-9 x2 Note: Ring Twice, please", "create_order_draft",
     {"customer_id": "C-7", "lines": [{"sku": "SKU-9", "qty": 2}], "note": "Ring Twice, please"}),
    ("cancel order O-17", "cancel_order", {"order_id": "O-17"}),
    ("cancel order O-17 because customer changed mind", "cancel_order",
     {"order_id": "O-17", "reason": "customer changed mind"}),
    ("adjust stock SKU-9 +5 because recount", "adjust_stock",
     {"sku": "SKU-9", "delta": 5, "reason": "recount"}),
    ("adjust stock SKU-9 -3 because broken", "adjust_stock",
     {"sku": "SKU-9", "delta": -3, "reason": "broken"}),
    ("refund O-17 12.50 EUR", "refund_payment",
     {"order_id": "O-17", "amount_minor": 1250, "currency": "EUR", "channel": "original"}),
    ("refund O-17 12.5 eur", "refund_payment",
     {"order_id": "O-17", "amount_minor": 1250, "currency": "EUR", "channel": "original"}),
    ("refund O-17 1000 JPY", "refund_payment",
     {"order_id": "O-17", "amount_minor": 1000, "currency": "JPY", "channel": "original"}),
    ("credit O-17 12.50 EUR because damaged in transit", "issue_credit_note",
     {"order_id": "O-17", "amount_minor": 1250, "currency": "EUR", "reason": "damaged in transit"}),
    ("Credit O-17 7 jpy because goodwill", "issue_credit_note",
     {"order_id": "O-17", "amount_minor": 7, "currency": "JPY", "reason": "goodwill"}),
])
def test_direct_commands_become_one_tool_call(text, tool, arguments):
    called = only_call(plan(ask(text)))
    assert (called["name"], called["arguments"]) == (tool, arguments)


@pytest.mark.parametrize(("text", "tool", "arguments"), [
    ("set line 31 to SKU-9 x4", "update_draft_line", {"item_number": 31, "expected_sku": "SKU-9", "qty": 4}),
    ("change line 1 to quantity 4", "update_draft_line", {"item_number": 1, "expected_sku": "SKU-9", "qty": 4}),
    ("add SKU-10 x1", "add_draft_line", {"sku": "SKU-10", "qty": 1}),
    ("remove line 2 SKU-10", "remove_draft_line", {"item_number": 2, "expected_sku": "SKU-10"}),
    ("note: Leave at Gate 3", "set_draft_note", {"note": "Leave at Gate 3"}),
])
def test_draft_edits_read_the_open_draft_then_edit_its_revision(text, tool, arguments):
    history = ask(text)
    first = plan(history)
    assert only_call(first)["name"] == "get_order_task" and only_call(first)["arguments"] == {}

    second = only_call(plan(after(history, first, ok({"status": "ok", "draft": DRAFT}))))

    assert second["name"] == tool
    assert second["arguments"] == {"draft_id": "D-1002", "base_revision": 3, **arguments}


def test_submit_reads_the_task_submits_then_reports_each_outcome():
    history = ask("submit")
    first = plan(history)
    history = after(history, first, ok({"status": "ok", "draft": DRAFT}))
    second = plan(history)
    assert only_call(second) == {"id": "rules-2", "name": "submit_order",
                                 "arguments": {"draft_id": "D-1002", "revision": 3}}

    waiting = after(history, second, {"status": "awaiting_approval", "pending_id": "P-1",
                                      "expires_at": "2026-10-20T10:15:00+00:00",
                                      "approval_url": "/resume/P-1"})
    assert "awaiting approval" in plan(waiting).text and "/resume/P-1" in plan(waiting).text

    rejected = [*waiting, tool_message("rules-2", {"status": "not_executed", "reason": "rejected",
                                                    "comment": "price too low"})]
    reply = plan(rejected)
    assert reply.tool_calls == [] and "not executed: rejected" in reply.text and "price too low" in reply.text


def test_an_ambiguous_task_lists_the_candidates_and_the_user_can_pick_one():
    task = ok({"status": "ambiguous", "candidates": [
        {"draft_id": "D-1", "revision": 2, "customer_id": "C-1",
         "total_amount_minor": 1000, "currency": "EUR"},
        {"draft_id": "D-2", "revision": 5, "customer_id": "C-2",
         "total_amount_minor": 2500, "currency": "EUR"},
    ]})
    history = ask("submit")
    reply = plan(after(history, plan(history), task))
    assert reply.tool_calls == []
    assert "D-1" in reply.text and "D-2" in reply.text and "25.00 EUR" in reply.text

    chosen = ask("draft D-2: submit")
    submitted = only_call(plan(after(chosen, plan(chosen), task)))
    assert submitted["arguments"] == {"draft_id": "D-2", "revision": 5}


def test_no_open_draft_is_explained():
    history = ask("add SKU-1 x1")
    reply = plan(after(history, plan(history), ok({"status": "none"})))
    assert reply.tool_calls == [] and "no open draft" in reply.text


@pytest.mark.parametrize(("content", "expected"), [
    (ok({"draft_id": "D-9", "revision": 1, "customer_name": "Acme", "currency": "EUR",
         "total_amount_minor": 1999, "lines": [{}]}),
     "Draft D-9 revision 1 for Acme: 1 line(s), total 19.99 EUR"),
    ({"status": "business_rejected", "error": {"code": "sku_mismatch", "message": "line 2 holds SKU-3"}},
     "sku_mismatch"),
    ({"status": "failed", "error": {"code": "invalid_arguments", "message": "qty"}},
     "failed: invalid_arguments"),
    ({"status": "not_executed", "reason": "expired"}, "not executed: expired"),
])
def test_the_final_text_summarises_the_outcome(content, expected):
    history = ask("draft for C-1: SKU-1 x1")
    reply = plan(after(history, plan(history), content))
    assert reply.tool_calls == [] and expected in reply.text


def test_call_ids_are_deterministic_and_count_earlier_runs():
    earlier = [user_message("show task"), assistant_message(None, [
        {"id": "rules-1", "name": "get_order_task", "arguments": {}},
        {"id": "rules-2", "name": "get_product", "arguments": {"sku": "S"}}]),
        tool_message("rules-1", ok({"status": "none"})), tool_message("rules-2", ok({"sku": "S"}))]
    history = ask("show product SKU-9", *earlier)
    assert plan(history) == plan(history)
    assert only_call(plan(history))["id"] == "rules-3"
    assert only_call(plan(history, call_id_prefix="S-1:"))["id"] == "S-1:3"


def test_help_and_unknown_text_explain_the_commands():
    assert plan(ask("HELP")).text == HELP
    assert "find customer" in HELP and "refund <order_id> <amount> <CUR>" in HELP
    assert "credit <order_id> <amount> <CUR> because <reason>" in HELP
    reply = plan(ask("please do something clever"))
    assert reply.tool_calls == [] and "did not understand" in reply.text and "adjust stock" in reply.text


@pytest.mark.parametrize("text", [
    "refund O-17 12.345 EUR", "refund O-17 12,50 EUR", "refund O-17 1e3 EUR", "refund O-17 -5 EUR",
    "refund O-17 0 EUR", "refund O-17 12.5 JPY", "credit O-17 12.345 EUR because x", "credit O-17 0 EUR because x",
    "draft for C-1: SKU-1 two", "draft X-1: show task",
    "show draft D-1 lines 0-3", "show draft D-1 lines 9-2", "show draft D-1 lines 1-201",
])
def test_bad_values_get_a_text_reply_and_no_call(text):
    reply = plan(ask(text))
    assert reply.tool_calls == [] and reply.text


@pytest.mark.parametrize(("text", "currency", "minor"), [
    ("12.5", "EUR", 1250), ("12.50", "eur", 1250), ("0.01", "USD", 1), ("19.99", "EUR", 1999),
    ("1000", "JPY", 1000), ("1.234", "KWD", 1234), ("123456789012345678.99", "EUR", 12345678901234567899),
])
def test_amounts_convert_exactly_to_minor_units(text, currency, minor):
    assert parse_amount_minor(text, currency) == minor


@pytest.mark.parametrize(("text", "currency"), [
    ("12.345", "EUR"), ("12.5", "JPY"), ("1.2345", "KWD"), ("12,50", "EUR"), ("1e3", "EUR"), ("-1", "EUR"),
    ("+1", "EUR"), ("0", "EUR"), ("0.00", "EUR"), ("", "EUR"), ("١٢", "EUR"), ("12", "EURO"),
])
def test_inexact_or_malformed_amounts_are_refused(text, currency):
    with pytest.raises(InvalidAmount):
        parse_amount_minor(text, currency)


def test_minor_units_format_back_with_the_currency_exponent():
    assert format_minor(1250, "EUR") == "12.50 EUR"
    assert format_minor(5, "USD") == "0.05 USD"
    assert format_minor(1000, "JPY") == "1000 JPY"
    assert format_minor(-1234, "KWD") == "-1.234 KWD"


@pytest.mark.parametrize("text", ["show catalog", "Show me the catalog once more", "list the whole catalogue",
                                  "show me the catalog again."])
def test_the_catalog_is_every_product(text):
    called = only_call(plan(ask(text)))
    assert (called["name"], called["arguments"]) == ("search_products", {"query": ""})


def test_products_and_customers_are_listed_side_by_side_and_both_summarised():
    history = ask("find products and customers")
    reply = plan(history)
    assert reply.text is None
    assert [(c["id"], c["name"], c["arguments"]) for c in reply.tool_calls] == [
        ("rules-1", "search_products", {"query": ""}), ("rules-2", "search_customers", {"query": ""})]
    assert plan(ask("find customers and products ACME")).tool_calls[1]["arguments"] == {"query": "ACME"}
    called = [*history, assistant_message(None, reply.tool_calls)]
    half = [*called, tool_message("rules-1", ok({"items": [{"sku": "SKU-9", "name": "Bolt"}]}))]
    assert plan(half) == PlannerReply("Still waiting for the result of search_customers.")
    done = [*half, tool_message("rules-2", ok({"items": [{"customer_id": "C-7", "name": "Acme"}]}))]
    answer = plan(done).text
    assert "Found 1 product(s).\n- SKU-9 Bolt" in answer and "Found 1 customer(s).\n- C-7 Acme" in answer


def test_call_numbers_continue_after_the_highest_one_the_view_shows():
    # The context view left out the pairs rules-1..rules-4 (a later listing shows the same): the next call
    # must not take a number the turn's own calls or the shown ones already use.
    shown = [user_message("find product"), assistant_message(None, [
        {"id": "rules-5", "name": "search_products", "arguments": {"query": ""}}]),
        tool_message("rules-5", ok({"items": []}))]
    assert only_call(plan(ask("show task", *shown)))["id"] == "rules-6"
    assert only_call(plan(ask("show task", *shown), call_id_prefix="S-1:"))["id"] == "S-1:2"


def test_show_context_describes_the_request_it_was_given():
    revision = {**DRAFT, "lines": [{"item_number": n, "sku": f"SKU-{n}", "qty": n} for n in range(1, 4)]}
    page = {**DRAFT, "revision": 4, "line_count": 3, "lines": [{"item_number": 2, "sku": "SKU-2", "qty": 2}]}
    history = ask("show context", user_message("draft for C-7: ..."), assistant_message(None, [
        {"id": "rules-1", "name": "create_order_draft", "arguments": {}},
        {"id": "rules-2", "name": "get_draft", "arguments": {}},
        {"id": "rules-3", "name": "search_products", "arguments": {}}]),
        tool_message("rules-1", {"projected": True, "refresh_required": True, **revision}),
        tool_message("rules-2", ok(page)),
        tool_message("rules-3", {"omitted": True, "refresh_required": True}))
    reply = plan(history)
    assert reply.tool_calls == []
    first, *drafts = reply.text.split("\n")
    assert first.startswith(f"This request holds {len(history)} message(s), ~") and "2 user message(s)" in first
    assert "3 tool result(s) (1 projected, 1 omitted)" in first
    assert drafts == ["Drafts shown (newest revision):", "- D-1002 revision 4: 1 of 3 line(s) (call rules-2)"]
    assert plan(ask("show context")).text.endswith("No draft is shown.")
