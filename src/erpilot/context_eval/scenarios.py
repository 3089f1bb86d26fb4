"""Frozen long sessions for `erpilot context-eval`: scripted histories with the facts the next step needs.

Every scenario is a session as the agent stores it (user messages, the model's tool calls, the ERP's
results in the shapes of SPEC §2, the model's answers), ending with the user message the model must act
on next. The values are derived from fixed hashes, not from line numbers, so a fact cannot be guessed
from its neighbours. Each scenario names the failure class of seed 003 it covers; the long sessions of
issue 27 (many runs rather than a few large results) are in ``long_sessions``.
"""

from __future__ import annotations

from typing import Any

from erpilot.context_eval.builders import (
    CHECK_CODE,
    Scenario,
    Script,
    catalog,
    customer,
    customers,
    draft,
    line_of,
    ok,
    product,
    rejected,
    sku,
)
from erpilot.context_eval.facts import DraftCustomer, DraftLine, LatestResult, UserSays
from erpilot.context_eval.long_sessions import LONG_SESSIONS

__all__ = ["SCENARIOS", "Scenario", "all_scenarios", "line_of"]


def _line_fact(revision: dict[str, Any], item_number: int) -> DraftLine:
    line = line_of(revision, item_number)
    return DraftLine(revision["draft_id"], revision["revision"], item_number, line["sku"], line["qty"])


def issue_19() -> Scenario:
    """Issue 19 exactly: a check code, eight listings, a 26-line draft, three more listings, an edit."""
    s = Script().user(f"Bitte merken: {CHECK_CODE} gehört auf den Lieferschein.").answer("Noted.")
    for what in ("product", "customer", "product", "product", "customer", "product", "product", "product"):
        s.listing(what)
    rev = draft("D-1001", 1, 26)
    s.run("draft for C-1001: 26 lines", "create_order_draft",
          {"customer_id": "C-1001", "lines": [{"sku": x["sku"], "qty": x["qty"]} for x in rev["lines"]]},
          ok(rev), "Draft D-1001 revision 1 created.")
    for _ in range(3):
        s.listing("product")
    s.user("change line 17 to quantity 2")
    return Scenario("issue_19_line_17", "the issue's session: line 17 of a 26-line draft", s.entries,
                    [_line_fact(rev, 17), DraftCustomer("D-1001", 1, customer(0)["name"]), UserSays(CHECK_CODE)])


def middle_line() -> Scenario:
    s = Script()
    rev = draft("D-1002", 3, 120, customer_n=2)
    s.run("show draft D-1002", "get_draft", {"draft_id": "D-1002"}, ok({**rev, "line_count": 120}), "120 lines.")
    for n in range(10):
        s.listing("product" if n % 3 else "customer")
        s.product_read(n)
    s.user("set line 61 to quantity 5, keep the rest")
    return Scenario("middle_line_of_long_draft", "the middle line of a 120-line draft", s.entries,
                    [_line_fact(rev, 61), DraftCustomer("D-1002", 3, customer(2)["name"])])


def early_requirement() -> Scenario:
    s = Script().user("Independent of everything else: the delivery must go to gate 4, ramp B, before 7:00.")
    s.answer("Understood.")
    for n in range(12):
        s.listing("product" if n % 2 else "customer")
    rev = draft("D-1003", 1, 30, customer_n=1)
    s.run("draft for C-1002", "create_order_draft", {"customer_id": "C-1002", "lines": []}, ok(rev), "Created.")
    s.user("Repeat my delivery requirement and the total of the draft.")
    return Scenario("early_independent_requirement", "an early requirement that no tool result holds", s.entries,
                    [UserSays("gate 4, ramp B, before 7:00"),
                     LatestResult("create_order_draft", "total_amount_minor", rev["total_amount_minor"])])


def newer_none() -> Scenario:
    s = Script()
    rev = draft("D-1004", 2, 30)
    s.run("show task", "get_order_task", {}, ok({"status": "ok", "draft": rev}), "Open draft D-1004.")
    for n in range(12):
        s.listing("product" if n % 2 else "customer")
    s.run("show task", "get_order_task", {}, ok({"status": "none"}), "No open draft.")
    s.user("Is there still an open draft I can add to?")
    return Scenario("newer_none_after_success", "a newer get_order_task none after an older ok", s.entries,
                    [LatestResult("get_order_task", "status", "none")])


def newer_failure() -> Scenario:
    s = Script()
    for _ in range(6):
        s.product_read(7)
        s.listing("product")
    s.run("show product again", "get_product", {"sku": sku(7)},
          rejected("not_found", f"product {sku(7)} not found"), "Not found.")
    for n in range(5):
        s.listing("customer" if n % 2 else "product")
    s.user(f"Can I still order {sku(7)}?")
    return Scenario("newer_failure_after_success", "a newer failure after older successes of the same read",
                    s.entries, [LatestResult("get_product", "code", "not_found")])


def two_drafts() -> Scenario:
    s = Script()
    first, second = draft("D-1005", 1, 32, customer_n=3), draft("D-1006", 1, 32, customer_n=4)
    s.run("draft for C-1004", "create_order_draft", {"customer_id": "C-1004", "lines": []}, ok(first), "Created.")
    for _ in range(6):
        s.listing("product")
    s.run("draft for C-1005", "create_order_draft", {"customer_id": "C-1005", "lines": []}, ok(second), "Created.")
    for n in range(6):
        s.listing("customer" if n % 2 else "product")
    candidates = [{k: d[k] for k in ("draft_id", "revision", "customer_id", "total_amount_minor")}
                  for d in (first, second)]
    s.run("show task", "get_order_task", {}, ok({"status": "ambiguous", "candidates": candidates}), "Two drafts.")
    s.user("draft D-1006: change line 12 to quantity 3")
    return Scenario("two_open_drafts", "two open drafts and an ambiguous task", s.entries,
                    [_line_fact(first, 12), _line_fact(second, 12), LatestResult("get_order_task", "status",
                                                                                 "ambiguous"),
                     DraftCustomer("D-1005", 1, customer(3)["name"]), DraftCustomer("D-1006", 1, customer(4)["name"])])


def revisions() -> Scenario:
    s = Script()
    changed: dict[int, int] = {}
    rev = draft("D-1007", 1, 40)
    s.run("draft for C-1001", "create_order_draft", {"customer_id": "C-1001", "lines": []}, ok(rev), "Created.")
    for step in range(2, 9):
        item = 3 + step * 4
        changed[item] = step
        rev = draft("D-1007", step, 40, changed=dict(changed))
        s.run(f"change line {item} to quantity {step}", "update_draft_line",
              {"draft_id": "D-1007", "base_revision": step - 1, "item_number": item,
               "expected_sku": line_of(rev, item)["sku"], "qty": step}, ok(rev), f"Revision {step}.")
        s.listing("product")
    s.user("what is on line 35 now, and line 7?")
    return Scenario("successive_revisions", "seven successive revisions of one draft", s.entries,
                    [_line_fact(rev, 35), _line_fact(rev, 7), _line_fact(rev, 11)])


def full_names() -> Scenario:
    s = Script()
    for _ in range(8):
        s.listing("customer")
    rev = draft("D-1008", 1, 28, customer_n=1)
    s.run("draft for C-1002", "create_order_draft", {"customer_id": "C-1002", "lines": []}, ok(rev), "Created.")
    for _ in range(4):
        s.listing("product")
    s.user("Write the customer's full legal name exactly as on the draft.")
    return Scenario("full_customer_names", "a long full customer name on the draft", s.entries,
                    [DraftCustomer("D-1008", 1, customer(1)["name"])])


def parallel() -> Scenario:
    s = Script()
    for turn in range(5):
        s.user(f"compare batch {turn}")
        s.call(*[("get_product", {"sku": sku(10 * turn + k)}, ok(product(10 * turn + k, on_hand=200 + turn * 10 + k)))
                 for k in range(3)])
        s.call(("search_products", {"query": ""}, ok(catalog())), ("search_customers", {"query": ""},
                                                                   ok(customers())))
        s.answer(f"Batch {turn} compared.")
    s.user(f"Again: stock of {sku(40)}, {sku(41)} and {sku(42)}?")
    return Scenario("parallel_calls", "parallel calls, each pair intact", s.entries,
                    [LatestResult("get_product", "on_hand", 240 + k, sku=sku(40 + k)) for k in range(3)])


def referenced_sku() -> Scenario:
    s = Script()
    special = {"items": [product(n) for n in range(60, 110)]}
    s.run("find product serie", "search_products", {"query": "serie"}, ok(special), "Found 50.")
    for n in range(12):
        s.listing("product" if n % 2 else "customer")
    s.user(f"What did {sku(77)} cost in the first search?")
    return Scenario("sku_named_by_the_user", "an old listing the latest message refers to by SKU", s.entries,
                    [LatestResult("search_products", "price_minor", product(77)["price_minor"], sku=sku(77))])


def long_draft() -> Scenario:
    s = Script()
    rev = draft("D-1009", 4, 500, customer_n=5)
    s.run("show task", "get_order_task", {}, ok({"status": "ok", "draft": rev}), "Open draft with 500 lines.")
    page = {**rev, "lines": rev["lines"][300:340], "line_count": 500, "offset": 300, "limit": 40}
    s.run("show draft D-1009 lines 301-340", "get_draft", {"draft_id": "D-1009", "offset": 300, "limit": 40},
          ok(page), "Lines 301-340.")
    for _ in range(4):
        s.listing("product")
    s.user("change line 317 to quantity 2")
    return Scenario("line_317_of_500", "a 500-line draft edited by line number", s.entries,
                    [_line_fact(rev, 317), DraftCustomer("D-1009", 4, customer(5)["name"])])


SCENARIOS = (issue_19, middle_line, early_requirement, newer_none, newer_failure, two_drafts, revisions,
             full_names, parallel, referenced_sku, long_draft, *LONG_SESSIONS)


def all_scenarios() -> list[Scenario]:
    return [build() for build in SCENARIOS]
