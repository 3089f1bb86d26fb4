"""Long sessions under a small budget (issue 27, SPEC §8, §9): the view degrades further before it gives up.

Beyond shrinking tool results: a read that a later call shows again leaves the view with its call,
markers shrink to the tiny form, earlier answers are cut to their first line, then to ``[…]``, then leave;
``context_overflow`` only when the system prompt, the user messages and the open drafts' current state
(with the current turn's pairs) alone exceed the budget. The size is that of the messages as the model
gets them (its own call ids).
"""

from __future__ import annotations

import json

import pytest

from erpilot_agent.domain.context_reductions import View
from erpilot_agent.domain.context_view import ContextOverflow, build_context
from erpilot_agent.domain.erp_projection import project_erp_result
from erpilot_agent.domain.history import assistant_message, estimate_tokens, system_message, tool_message, user_message
from erpilot_agent.domain.model_ids import for_model

pytestmark = pytest.mark.unit

SYSTEM = "You operate the Erpilot ERP."
CATALOG = {"items": [{"sku": f"SKU-{n:03d}", "name": f"Catalog product {n} with a long name", "status": "active",
                      "price_minor": 100 + n, "currency": "EUR", "on_hand": n} for n in range(30)]}
CUSTOMERS = {"items": [{"customer_id": f"C-{1001 + n}", "name": f"Customer {n} GmbH", "discount_pct": 0}
                       for n in range(6)]}
LISTED = "Found 30 product(s).\n" + "\n".join(f"- SKU-{n:03d} Catalog product {n}" for n in range(10))


def draft(revision: int = 1, lines: int = 26, status: str = "open") -> dict:
    return {"draft_id": "D-1001", "revision": revision, "status": status, "customer_id": "C-1001",
            "customer_name": "Nordwind Logistik GmbH & Co. KG", "currency": "EUR", "total_amount_minor": 99_00,
            "lines": [{"item_number": n, "sku": f"SKU-{n:03d}", "name": f"Catalog product {n} with a long name",
                       "qty": n % 7 + 1, "unit_price_minor": 100 + n, "discount_pct": 0,
                       "line_total_minor": (100 + n) * (n % 7 + 1), "stock_before": n} for n in range(1, lines + 1)]}


def ok(result: dict) -> dict:
    return {"status": "succeeded", "result": result}


class Session:
    """A stored history as the agent keeps it: ``<run>:rules-<n>`` ids with the model's ``rules-<n>`` beside."""

    def __init__(self) -> None:
        self.entries: list[dict] = [system_message(SYSTEM)]
        self.calls = 0
        self.run = 0

    def user(self, text: str) -> Session:
        self.run += 1
        self.entries.append(user_message(text))
        return self

    def call(self, *calls: tuple[str, dict, dict]) -> list[str]:
        ids = []
        for _ in calls:
            self.calls += 1
            ids.append(f"run_{self.run:032d}:rules-{self.calls}")
        message = assistant_message(None, [{"id": i, "name": name, "arguments": args}
                                           for i, (name, args, _) in zip(ids, calls, strict=True)])
        for stored, call_id in zip(message["tool_calls"], ids, strict=True):
            stored["model_id"] = call_id.split(":")[1]
        self.entries.append(message)
        self.entries += [tool_message(i, content) for i, (_, _, content) in zip(ids, calls, strict=True)]
        return ids

    def answer(self, text: str) -> Session:
        self.entries.append(assistant_message(text))
        return self

    def listings(self, runs: int) -> Session:
        for _ in range(runs):
            self.user("find products and customers")
            self.call(("search_products", {"query": ""}, ok(CATALOG)), ("search_customers", {"query": ""},
                                                                       ok(CUSTOMERS)))
            self.answer(LISTED)
        return self


def sent(view: list[dict]) -> list[dict]:
    return for_model(view)


def contents(view: list[dict]) -> dict[str, dict]:
    return {m["tool_call_id"]: json.loads(m["content"]) for m in view if m["role"] == "tool"}


def pairs_intact(view: list[dict]) -> bool:
    index = 0
    while index < len(view):
        calls = [c["id"] for c in view[index].get("tool_calls") or []]
        if [m.get("tool_call_id") for m in view[index + 1:index + 1 + len(calls)]] != calls:
            return False
        if view[index].get("role") == "tool":
            return False
        index += 1 + len(calls)
    return True


def the_issue_session() -> Session:
    s = Session().listings(11)
    s.user("draft for C-1001: " + ", ".join(f"SKU-{n:03d} x{n % 7 + 1}" for n in range(1, 27)))
    s.call(("create_order_draft", {"customer_id": "C-1001", "lines": []}, ok(draft())))
    s.answer("Draft D-1001 revision 1 for Nordwind Logistik GmbH & Co. KG: 26 line(s), total 99.00 EUR.")
    s.user("show me the catalog once more")
    s.call(("search_products", {"query": ""}, ok(CATALOG)))
    return s


def test_the_issue_session_fits_4000_tokens_with_the_draft_and_the_current_listing():
    s = the_issue_session()
    assert estimate_tokens(sent(s.entries)) > 3 * 4000  # far over the budget, even as sent
    view = build_context(s.entries, budget_tokens=4000)
    assert estimate_tokens(sent(view)) <= 4000 and pairs_intact(sent(view))
    assert [m for m in view if m["role"] in ("system", "user")] == [m for m in s.entries if m["role"] in (
        "system", "user")]
    shown = contents(view)
    created = next(c for c in shown.values() if c.get("result", {}).get("draft_id") == "D-1001")
    assert created["result"]["revision"] == 1 and [(x["item_number"], x["sku"], x["qty"]) for x in created[
        "result"]["lines"]] == [(n, f"SKU-{n:03d}", n % 7 + 1) for n in range(1, 27)]
    current = shown[s.entries[-1]["tool_call_id"]]
    assert current["result"]["count"] == 30 or len(current["result"]["items"]) == 30


def test_a_read_shown_again_later_leaves_the_view_with_its_call():
    s = Session().listings(3)
    s.user("thanks")
    first_products, first_customers = s.entries[3]["tool_call_id"], s.entries[4]["tool_call_id"]
    roomy = build_context(s.entries, budget_tokens=estimate_tokens(sent(s.entries)) - 50, tool_bytes=100_000)
    assert contents(roomy)[first_products]["omitted"] is True  # first a marker ...
    tight = build_context(s.entries, budget_tokens=1500, tool_bytes=100_000)
    ids = {c["id"] for m in tight for c in m.get("tool_calls") or []}
    assert first_products not in ids and first_customers not in ids  # ... then the pair leaves, call and result
    assert first_products not in contents(tight) and pairs_intact(tight)
    last = s.entries[-5]["tool_calls"]
    assert [c["id"] for c in last] == [m["tool_call_id"] for m in s.entries[-4:-2]]
    assert contents(tight)[last[0]["id"]]["result"]["items"][29]["sku"] == "SKU-029"  # the newest stays whole


def test_an_answer_with_several_calls_leaves_only_with_all_of_them():
    s = Session()
    s.user("find products and customers")
    products, customers = s.call(("search_products", {"query": ""}, ok(CATALOG)),
                                 ("search_customers", {"query": "x"}, ok(CUSTOMERS)))
    s.answer(LISTED)
    s.user("and the catalog again")
    [again] = s.call(("search_products", {"query": ""}, ok(CATALOG)))
    s.user("thanks")
    view = build_context(s.entries, budget_tokens=1200, tool_bytes=100_000)
    [message] = [m for m in view if m.get("tool_calls") and products in {c["id"] for c in m["tool_calls"]}]
    assert [c["id"] for c in message["tool_calls"]] == [products, customers] and pairs_intact(view)
    assert contents(view)[products] == {"omitted": True, "refresh_required": True, "call_id": products,
                                        "see_call": again}  # the repeated read: a tiny pair
    view = build_context(s.entries, budget_tokens=300, tool_bytes=100_000)
    ids = [c["id"] for m in view for c in m.get("tool_calls") or []]
    assert products not in ids and customers not in ids and pairs_intact(view)  # the turn left whole


def test_a_superseded_draft_revision_shrinks_to_the_tiny_marker_before_it_leaves():
    s = Session()
    s.user("draft")
    [created] = s.call(("create_order_draft", {"customer_id": "C-1001", "lines": []}, ok(draft(1))))
    s.user("change line 3")
    [updated] = s.call(("update_draft_line", {"draft_id": "D-1001", "base_revision": 1}, ok(draft(2))))
    s.listings(4).user("what is on line 3?")
    seen_tiny = False
    for budget in range(estimate_tokens(sent(s.entries)), 0, -60):
        try:
            view = build_context(s.entries, budget_tokens=budget)
        except ContextOverflow:
            break
        marker = contents(view).get(created)
        if marker is not None and "sha256" not in marker and marker.get("omitted"):
            assert marker == {"omitted": True, "refresh_required": True, "call_id": created, "see_call": updated}
            seen_tiny = True
        assert contents(view)[updated]["result"]["revision"] == 2  # the current revision never goes
    assert seen_tiny


def test_repeated_answers_shrink_first_and_earlier_answers_go_before_the_current_result():
    s = Session()
    for n in range(4):
        s.user(f"show product SKU-{n:03d}")
        s.call(("get_product", {"sku": f"SKU-{n:03d}"}, ok(CATALOG["items"][n])))
        s.answer(LISTED)  # the same long answer every time
    s.user("find product")
    [current] = s.call(("search_products", {"query": ""}, ok(CATALOG)))
    full = estimate_tokens(sent(s.entries))
    view = build_context(s.entries, budget_tokens=full - 100, tool_bytes=100_000)
    answers = [m["content"] for m in view if m["role"] == "assistant" and m.get("content")]
    assert answers[0] == "Found 30 product(s). […]" and answers[-1] == LISTED  # the last one is not repeated
    assert "omitted" not in contents(view)[current]
    # The current turn's listing is omitted only once every earlier answer has left the view.
    budget = next(b for b in range(full, 0, -10) if contents(build_context(
        s.entries, budget_tokens=b, tool_bytes=100_000))[current].get("omitted"))
    view = build_context(s.entries, budget_tokens=budget, tool_bytes=100_000)
    assert [m for m in view if m["role"] == "assistant" and m.get("content")] == []
    assert [m["content"] for m in view if m["role"] == "user"] == [m["content"] for m in s.entries
                                                                   if m["role"] == "user"]
    view = build_context(s.entries, budget_tokens=budget + 10, tool_bytes=100_000)
    assert contents(view)[current]["result"]["count"] == 30  # projected, not omitted, with 10 tokens more


def test_at_the_floor_the_view_is_the_prompt_the_user_messages_and_the_open_draft_one_token_less_overflows():
    s = Session()
    s.user("draft for C-1001")
    [created] = s.call(("create_order_draft", {"customer_id": "C-1001", "lines": []}, ok(draft())))
    s.answer("Draft D-1001 revision 1.")
    s.listings(6).user("and now?")
    with pytest.raises(ContextOverflow) as nothing_fits:
        build_context(s.entries, budget_tokens=1)
    floor = nothing_fits.value.estimated_tokens  # what is left when everything that may go has gone
    view = build_context(s.entries, budget_tokens=floor)
    assert estimate_tokens(sent(view)) == floor and pairs_intact(view)
    with pytest.raises(ContextOverflow):
        build_context(s.entries, budget_tokens=floor - 1)
    assert [m["role"] for m in view] == ["system", "user", "assistant", "tool", *["user"] * 7]
    assert view[2]["tool_calls"][0]["id"] == created
    kept = contents(view)[created]
    assert kept["result"]["draft_id"] == "D-1001" and kept["result"]["line_count"] == 26 and "omitted" not in kept


def test_the_current_turns_pairs_never_leave_and_an_answer_keeps_all_its_calls_or_none():
    s = the_issue_session()
    s.user("find products and customers x")  # a turn whose second call is not repeated later
    s.call(("search_products", {"query": ""}, ok(CATALOG)), ("search_customers", {"query": "x"}, ok(CUSTOMERS)))
    s.answer(LISTED)
    s.user("show me the catalog once more")
    s.call(("search_products", {"query": ""}, ok(CATALOG)))
    current = {m["tool_call_id"] for m in s.entries[-1:]}
    answers = [[c["id"] for c in m["tool_calls"]] for m in s.entries if m.get("tool_calls")]
    for budget in range(4000, 0, -50):
        try:
            view = build_context(s.entries, budget_tokens=budget)
        except ContextOverflow:
            break
        assert pairs_intact(view) and current <= contents(view).keys()
        assert all([c["id"] for c in m["tool_calls"]] in answers for m in view if m.get("tool_calls"))
        in_view = {c["id"] for m in view for c in m.get("tool_calls") or []}
        for marker in contents(view).values():
            assert marker.get("see_call", next(iter(in_view))) in in_view and marker.get("call_id", "x") != ""


def test_the_budget_counts_the_ids_the_model_gets_not_the_longer_stored_ones():
    s = Session().listings(2)
    s.user("thanks")
    as_stored, as_sent = estimate_tokens(s.entries), estimate_tokens(sent(s.entries))
    assert as_sent < as_stored - 40
    view = build_context(s.entries, budget_tokens=as_sent, tool_bytes=100_000)
    assert view == build_context(s.entries, tool_bytes=100_000)  # it fits as sent: nothing is reduced
    for budget in range(as_stored, 200, -97):
        view = build_context(s.entries, budget_tokens=budget, tool_bytes=100_000)
        assert estimate_tokens(sent(view)) <= budget
        assert [c["id"] for m in sent(view) for c in m.get("tool_calls") or []] == [
            c["model_id"] for m in view for c in m.get("tool_calls") or []]  # the ids the model issued


def test_a_marker_never_names_a_call_that_has_left_the_view():
    # The ladder lets older pairs leave first, so this is guarded where a call leaves: a marker made while
    # its later call was there names the read instead when that call leaves; a later marker does from the start.
    s = Session()
    s.user("find product")
    [older] = s.call(("get_product", {"sku": "SKU-001"}, ok(CATALOG["items"][1])))
    s.user("again")
    [newer] = s.call(("get_product", {"sku": "SKU-001"}, ok(CATALOG["items"][1])))
    view = View(s.entries, project_erp_result)
    first, second = view.results
    assert view.omit(first, force=True) and json.loads(first.entry["content"])["see_call"] == newer
    assert view.leave(second)
    marker = contents(view.entries())[older]
    assert marker["omitted"] is True and "see_call" not in marker and marker["call_id"] == older
    assert marker["reread"] == {"tool": "get_product", "arguments": {"sku": "SKU-001"}}
    assert view.shrink(first)
    assert json.loads(first.entry["content"]) == {
        "omitted": True, "refresh_required": True, "call_id": older,
        "reread": {"tool": "get_product", "arguments": {"sku": "SKU-001"}}}
    assert estimate_tokens(sent(view.entries())) == view.tokens()  # the running size stays exact


def test_without_a_user_message_everything_is_the_current_turn_and_no_answer_is_cut():
    history = [system_message(SYSTEM), assistant_message(LISTED), assistant_message(LISTED)]
    with pytest.raises(ContextOverflow):  # nothing here may be cut: it is all the turn being worked on
        build_context(history, budget_tokens=estimate_tokens(history) - 10)
