"""Long sessions for `erpilot context-eval` (issue 27): many runs, each repeating reads the session already made.

The scenarios of ``scenarios`` press the budget with a few large results; these press it with
length: many user messages, many tool-call pairs and the rules model's answers, stored as the agent
stores them (``<run_id>:rules-<n>`` call ids with the model's own id beside them). Before issue 27 the
view could only shrink tool results, so the calls, markers and answers alone outgrew the budget and the
run failed with ``context_overflow`` although the user messages, the system prompt and the open draft
fitted easily.
"""

from __future__ import annotations

from typing import Any

from erpilot.context_eval.builders import (
    Scenario,
    Script,
    catalog,
    customer,
    customers,
    draft,
    line_of,
    ok,
    product,
    sku,
)
from erpilot.context_eval.facts import DraftCustomer, DraftLine, EveryUserMessage, LatestResult, UserSays
from erpilot_agent.context import Exchange, summarise

BOTH = "find products and customers"
EVERYTHING = (("search_products", {"query": ""}, ok(catalog(30))), ("search_customers", {"query": ""},
                                                                   ok(customers(6))))


def _line_fact(revision: dict[str, Any], item_number: int) -> DraftLine:
    line = line_of(revision, item_number)
    return DraftLine(revision["draft_id"], revision["revision"], item_number, line["sku"], line["qty"])


def _users(script: Script) -> EveryUserMessage:
    return EveryUserMessage(tuple(m["content"] for m in script.entries if m["role"] == "user"))


def _draft_text(customer_id: str, revision: dict[str, Any]) -> str:
    return f"draft for {customer_id}: " + ", ".join(f"{x['sku']} x{x['qty']}" for x in revision["lines"])


def _lines_of(revision: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"sku": x["sku"], "qty": x["qty"]} for x in revision["lines"]]


def _edit(s: Script, revision: dict[str, Any], item_number: int, qty: int, new: dict[str, Any]) -> None:
    """'change line n to quantity q' through the rules model: get_order_task, then update_draft_line."""
    arguments = {"draft_id": revision["draft_id"], "base_revision": revision["revision"], "item_number": item_number,
                 "expected_sku": line_of(revision, item_number)["sku"], "qty": qty}
    s.user(f"change line {item_number} to quantity {qty}")
    s.call(("get_order_task", {}, ok({"status": "ok", "draft": revision})))
    s.call(("update_draft_line", arguments, ok(new)))
    s.answer(summarise(Exchange("edit", "update_draft_line", arguments, ok(new))))


def issue_27() -> Scenario:
    """Issue 27 exactly: eleven runs listing everything, a 26-line draft, then the catalog once more."""
    s = Script(as_agent_stores=True)
    for _ in range(11):
        s.rules_run(BOTH, *EVERYTHING)
    rev = draft("D-1001", 1, 26)
    s.rules_run(_draft_text("C-1001", rev), ("create_order_draft", {"customer_id": "C-1001",
                                                                    "lines": _lines_of(rev)}, ok(rev)))
    s.user("show me the catalog once more").call(EVERYTHING[0])  # the planner now summarises this result
    return Scenario("issue_27_catalog_once_more", "the issue's session: 11 full listings, a draft, the catalog again",
                    s.entries, [_line_fact(rev, 1), _line_fact(rev, 17), _line_fact(rev, 26),
                                DraftCustomer("D-1001", 1, customer(0)["name"]),
                                LatestResult("search_products", "name", product(29)["name"], sku=sku(29)), _users(s)])


def many_distinct_lookups() -> Scenario:
    """Forty different products looked up one by one around a draft edited twice: nothing repeats itself."""
    s = Script(as_agent_stores=True)
    s.user("Whatever we order today: invoice to cost centre 4711-B, never to the head office.").answer("Noted.")
    rev = draft("D-2001", 1, 30, customer_n=2)
    s.rules_run(_draft_text("C-1003", rev), ("create_order_draft", {"customer_id": "C-1003",
                                                                    "lines": _lines_of(rev)}, ok(rev)))
    changed: dict[int, int] = {}
    for n in range(40):
        if n in (12, 27):  # lines 11 and 18 change
            changed[5 + n // 2] = n // 3
            new = draft("D-2001", rev["revision"] + 1, 30, customer_n=2, changed=dict(changed))
            _edit(s, rev, 5 + n // 2, n // 3, new)
            rev = new
        if n % 8 == 7:
            s.rules_run(BOTH, *EVERYTHING)
        s.rules_run(f"show product {sku(n)}", ("get_product", {"sku": sku(n)}, ok(product(n, on_hand=300 + n))))
    s.user("change line 12 to quantity 4")
    return Scenario("forty_distinct_lookups", "40 different product reads around a draft edited twice", s.entries,
                    [_line_fact(rev, 12), _line_fact(rev, 11), _line_fact(rev, 18),
                     DraftCustomer("D-2001", 3, customer(2)["name"]), UserSays("cost centre 4711-B"),
                     LatestResult("get_product", "on_hand", 339, sku=sku(39)), _users(s)])


def draft_reworked() -> Scenario:
    """A 40-line draft changed line by line fourteen times, each change reading the whole task first."""
    s = Script(as_agent_stores=True)
    rev = draft("D-3001", 1, 40, customer_n=4)
    s.rules_run(_draft_text("C-1005", rev), ("create_order_draft", {"customer_id": "C-1005",
                                                                    "lines": _lines_of(rev)}, ok(rev)))
    changed: dict[int, int] = {}
    for step in range(14):
        item = 1 + step * 7 % 40
        changed[item] = step + 1
        new = draft("D-3001", rev["revision"] + 1, 40, customer_n=4, changed=dict(changed))
        _edit(s, rev, item, step + 1, new)
        rev = new
        if step % 5 == 4:
            s.rules_run(BOTH, *EVERYTHING)
    s.user("what is on line 35 now, and on line 22?")
    return Scenario("draft_reworked_14_times", "a 40-line draft edited 14 times, the task read before each edit",
                    s.entries, [_line_fact(rev, 35), _line_fact(rev, 22), _line_fact(rev, 1),
                                DraftCustomer("D-3001", 15, customer(4)["name"]), _users(s)])


LONG_SESSIONS = (issue_27, many_distinct_lookups, draft_reworked)
