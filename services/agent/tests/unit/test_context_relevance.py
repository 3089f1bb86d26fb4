"""Relevance before age (SPEC §9): what the context view gives up first when the budget presses."""

from __future__ import annotations

import hashlib
import json

import pytest

from erpilot_agent.domain.context_relevance import line_numbers, tokens
from erpilot_agent.domain.context_view import ContextOverflow, build_context
from erpilot_agent.domain.history import assistant_message, estimate_tokens, system_message, tool_message, user_message

pytestmark = pytest.mark.unit


def sku_and_qty(n: int) -> tuple[str, int]:
    digest = hashlib.sha256(f"line-{n}".encode()).hexdigest()
    return f"SKU-{digest[:6].upper()}", int(digest[6:10], 16) % 97 + 1


def draft(draft_id: str, revision: int, line_count: int, *, status: str = "open", customer: str = "C-7",
          name: str = "Müller & Söhne Maschinenbau GmbH & Co. KG", changed: dict[int, int] | None = None) -> dict:
    lines = []
    for n in range(1, line_count + 1):
        sku, qty = sku_and_qty(n)
        qty = (changed or {}).get(n, qty)
        lines.append({"item_number": n, "sku": sku, "name": f"Präzisionsteil {n} – lange Bezeichnung", "qty": qty,
                      "unit_price_minor": 1999, "discount_pct": 5, "line_total_minor": 1899 * qty,
                      "stock_before": 500 + n})
    return {"draft_id": draft_id, "revision": revision, "status": status, "customer_id": customer,
            "customer_name": name, "lines": lines, "total_amount_minor": 1899 * sum(x["qty"] for x in lines),
            "currency": "EUR", "note": "Lieferung vor Freitag", "valid_until": "2026-11-01T00:00:00+00:00"}


def listing(count: int = 40, salt: str = "") -> dict:
    return {"items": [{"sku": f"SKU-{n:04d}{salt}", "name": f"Catalog product number {n} in a long name",
                       "status": "active", "price_minor": 100 + n, "currency": "EUR", "on_hand": n}
                      for n in range(count)]}


def call(call_id: str, name: str, **arguments) -> dict:
    return assistant_message(None, [{"id": call_id, "name": name, "arguments": arguments}])


def exchange(call_id: str, name: str, result: dict, status: str = "succeeded", **arguments) -> list[dict]:
    content = {"status": status, "result": result} if status == "succeeded" else {"status": status, **result}
    return [call(call_id, name, **arguments), tool_message(call_id, content)]


def contents(view: list[dict]) -> dict[str, dict]:
    return {m["tool_call_id"]: json.loads(m["content"]) for m in view if m["role"] == "tool"}


def reduced(content: dict) -> bool:
    return bool(content.get("omitted") or content.get("projected"))


def first_reduced_order(history: list[dict], **kw) -> list[str]:
    """The call ids in the order they are first reduced as the budget shrinks."""
    order: list[str] = []
    for budget in range(estimate_tokens(history), 0, -25):
        try:
            view = build_context(history, budget_tokens=budget, **kw)
        except ContextOverflow:
            break
        assert estimate_tokens(view) <= budget
        order += [cid for cid, c in contents(view).items() if reduced(c) and cid not in order]
    return order


def test_the_drop_order_is_duplicates_superseded_reads_listings_revisions_then_age_then_kept():
    # Oldest first in the history is the reverse of the drop order, so age alone would get it wrong.
    history = [system_message("sys"), user_message("start"),
               *exchange("kept", "get_order_task", {"status": "ok", "draft": draft("D-1", 2, 20)}),
               *exchange("age", "get_order", {"order_id": "O-9", "status": "committed", "lines": [
                   {"sku": f"S-{n}", "name": "Bolt " * 8, "qty": n} for n in range(1, 25)]}, order_id="O-9"),
               *exchange("revision", "get_draft", draft("D-1", 1, 20), draft_id="D-1", revision=1),
               *exchange("listing", "search_customers", {"items": [
                   {"customer_id": f"C-{n}", "name": f"Customer number {n} of the region"} for n in range(30)]},
                   query=""),
               *exchange("superseded", "get_product", {"sku": "S-1", "name": "Bolt " * 200, "on_hand": 3},
                         sku="S-1"),
               *exchange("dup", "search_products", listing(), query="pen"),
               *exchange("stock", "adjust_stock", {"sku": "S-1", "name": "Bolt", "on_hand": 9}, sku="S-1",
                         delta=6, reason="recount"),
               *exchange("dup-later", "search_products", listing(), query="pen"),
               user_message("thanks")]
    order = first_reduced_order(history, tool_bytes=100_000)
    assert order.index("dup") < order.index("superseded") < order.index("listing") < order.index("revision") \
        < order.index("age") < order.index("kept")


def test_a_duplicate_becomes_a_reference_to_the_later_call():
    history = [user_message("list"), *exchange("a", "search_products", listing(), query=""),
               user_message("again"), *exchange("b", "search_products", listing(), query=""),
               user_message("thanks")]
    view = contents(build_context(history, budget_tokens=estimate_tokens(history) - 50, tool_bytes=100_000))
    assert view["a"]["omitted"] is True and view["a"]["reason"] == "duplicate"
    assert view["a"]["see_call"] == "b" and view["a"]["call_id"] == "a"
    assert view["b"] == {"status": "succeeded", "result": listing()}


def test_the_same_read_arguments_make_a_duplicate_even_when_the_content_changed():
    history = [user_message("list"), *exchange("a", "search_products", listing(salt="x"), query="pen"),
               *exchange("b", "search_products", listing(salt="y"), query="pen"), user_message("ok")]
    view = contents(build_context(history, budget_tokens=estimate_tokens(history) - 50, tool_bytes=100_000))
    assert view["a"]["reason"] == "duplicate" and view["a"]["see_call"] == "b" and "omitted" not in view["b"]


def test_a_newer_none_or_failure_wins_over_an_older_success():
    ok = {"status": "ok", "draft": draft("D-1", 3, 30)}
    failure = {"error": {"code": "not_found", "message": "product S-1 not found"}}
    history = [user_message("task"), *exchange("t1", "get_order_task", ok),
               *exchange("p1", "get_product", {"sku": "S-1", "name": "Bolt " * 60}, sku="S-1"),
               user_message("again"), *exchange("t2", "get_order_task", {"status": "none"}),
               *exchange("p2", "get_product", failure, status="business_rejected", sku="S-1"),
               user_message("what now?")]
    view = contents(build_context(history, budget_tokens=400))
    assert view["t2"] == {"status": "succeeded", "result": {"status": "none"}}
    assert view["p2"]["error"]["code"] == "not_found"
    assert view["t1"]["omitted"] and view["t1"]["see_call"] == "t2"
    assert view["p1"]["omitted"] and view["p1"]["see_call"] == "p2"


def test_every_open_drafts_current_revision_is_kept_projected_with_lines_customer_totals_and_revision():
    history = [user_message("two drafts")]
    history += exchange("a1", "create_order_draft", draft("D-1", 1, 26), customer_id="C-7", lines=[])
    history += exchange("b1", "create_order_draft", draft("D-2", 1, 26, customer="C-8", name="Nordwind Handel AG"),
                        customer_id="C-8", lines=[])
    history += exchange("a2", "update_draft_line", draft("D-1", 2, 26, changed={5: 1}), draft_id="D-1",
                        base_revision=1, item_number=5, expected_sku=sku_and_qty(5)[0], qty=1)
    for n in range(6):
        history += [user_message(f"listing {n}"),
                    *exchange(f"l{n}", "search_products", listing(salt=str(n)), query=str(n))]
    history.append(user_message("which drafts do I have?"))
    view = contents(build_context(history, budget_tokens=1980))
    for cid, draft_id, revision, name in (("a2", "D-1", 2, "Müller & Söhne Maschinenbau GmbH & Co. KG"),
                                          ("b1", "D-2", 1, "Nordwind Handel AG")):
        result = view[cid]["result"]
        assert (result["draft_id"], result["revision"], result["customer"]["name"]) == (draft_id, revision, name)
        assert result["total_amount_minor"] > 0 and result["line_count"] == 26
        assert [line["item_number"] for line in result["lines"]] == list(range(1, 27))
        assert view[cid]["call_id"] == cid
    assert view["a2"]["result"]["lines"][4]["qty"] == 1
    assert view["a1"]["omitted"] and view["a1"]["reason"] == "superseded_revision" and view["a1"]["see_call"] == "a2"
    assert view["a1"]["reread"] == {"tool": "get_draft", "arguments": {"draft_id": "D-1", "revision": 1}}
    assert all(view[f"l{n}"]["omitted"] for n in range(5))


def test_a_submitted_draft_is_no_longer_kept():
    history = [user_message("draft"), *exchange("d", "create_order_draft", draft("D-1", 1, 26), customer_id="C-7"),
               *exchange("s", "submit_order", {"order_id": "O-1", "status": "committed", "lines": []},
                         draft_id="D-1", revision=1),
               user_message("list"), *exchange("l", "search_products", listing(30), query="")]
    assert first_reduced_order(history, tool_bytes=100_000)[0] == "d"  # before the current turn's listing
    view = contents(build_context(history, budget_tokens=1000))
    assert "d" not in view and view["l"]["projected"] is True  # the draft's pair left before the listing shrank
    view = contents(build_context(history, budget_tokens=600))
    assert view.keys() == {"l"} and view["l"]["reason"] == "kept"


def test_results_the_latest_user_message_refers_to_are_kept():
    history = [user_message("list a"), *exchange("a", "search_products", listing(salt="A"), query="a"),
               user_message("list b"), *exchange("b", "search_products", listing(salt="B"), query="b"),
               user_message("list c"), *exchange("c", "search_products", listing(salt="C"), query="c"),
               user_message("tell me about SKU-0007A")]
    view = contents(build_context(history, budget_tokens=1500, tool_bytes=100_000))
    assert "omitted" not in view["a"]
    assert view["b"]["omitted"] and view["c"]["omitted"]


def test_the_line_number_in_the_latest_message_keeps_the_page_that_holds_it():
    page = {**draft("D-1", 1, 120), "line_count": 120}
    pages = []
    for start in (0, 40, 80):
        pages += exchange(f"p{start}", "get_draft", {**page, "lines": page["lines"][start:start + 40],
                                                      "offset": start, "limit": 40},
                          draft_id="D-1", offset=start, limit=40)
    history = [user_message("show all"), *pages, user_message("what is on line 57?")]
    view = contents(build_context(history, budget_tokens=1000))
    for other in ("p0", "p80"):  # reduced to a marker or to their touched lines (none)
        assert view[other].get("omitted") or view[other]["result"]["lines"] == []
    lines = view["p40"]["result"]["lines"]
    assert len(lines) == 40 and view["p40"]["result"]["offset"] == 40 and view["p40"]["result"]["line_count"] == 120
    assert lines[16] == {"item_number": 57, "sku": sku_and_qty(57)[0], "qty": sku_and_qty(57)[1]}


def test_a_500_line_draft_is_projected_to_a_summary_with_the_touched_lines_and_the_page_call():
    big = draft("D-1", 4, 500)
    history = [user_message("draft D-1 is long"), *exchange("t", "get_order_task", {"status": "ok", "draft": big}),
               user_message("change line 317 to quantity 2")]
    content = contents(build_context(history))["t"]
    assert len(json.dumps(content).encode()) <= 4096
    summary = content["result"]["draft"]
    assert content["projected"] is True and content["call_id"] == "t"
    assert (summary["draft_id"], summary["revision"], summary["line_count"]) == ("D-1", 4, 500)
    assert summary["customer"]["name"] == "Müller & Söhne Maschinenbau GmbH & Co. KG"
    assert summary["total_amount_minor"] == big["total_amount_minor"]
    assert summary["lines_shown"] == "touched"
    assert summary["lines"] == [{"item_number": 317, "sku": sku_and_qty(317)[0], "qty": sku_and_qty(317)[1]}]
    assert summary["read_lines"] == {"tool": "get_draft",
                                     "arguments": {"draft_id": "D-1", "revision": 4, "offset": 0, "limit": 50}}


def test_parallel_calls_keep_both_halves_of_every_pair_and_user_messages_verbatim():
    history = [system_message("sys"), user_message("Merke: Prüfzeichen ✓-42"),
               assistant_message(None, [{"id": f"p{n}", "name": "search_products", "arguments": {"query": "x"}}
                                        for n in range(3)]),
               *[tool_message(f"p{n}", {"status": "succeeded", "result": listing()}) for n in range(3)],
               user_message("and?")]
    view = build_context(history, budget_tokens=2500, tool_bytes=100_000)
    assert [m["role"] for m in view] == ["system", "user", "assistant", "tool", "tool", "tool", "user"]
    assert [m["tool_call_id"] for m in view[3:6]] == ["p0", "p1", "p2"]
    assert contents(view)["p0"]["see_call"] == "p2" and "omitted" not in contents(view)["p2"]
    assert view[1] == history[1] and view[0] == history[0]
    # Tighter: the repeated reads cannot leave without p2 (one answer of the model is never cut down to
    # some of its calls): they shrink to tiny pairs naming p2. Tighter still, the whole turn leaves.
    view = build_context(history, budget_tokens=1500, tool_bytes=100_000)
    assert [m["role"] for m in view] == ["system", "user", "assistant", "tool", "tool", "tool", "user"]
    assert contents(view)["p1"] == {"omitted": True, "refresh_required": True, "call_id": "p1", "see_call": "p2"}
    assert contents(view)["p2"]["projected"] is True
    view = build_context(history, budget_tokens=200, tool_bytes=100_000)
    assert view == [history[0], history[1], history[-1]]


def test_user_words_name_lines_and_ids():
    assert line_numbers("change line 17 to quantity 2, and item #3; lines 30-32") == {17, 3, 30, 31, 32}
    assert line_numbers("lines 1-100000") == {1}
    assert tokens("Show D-1002, then SKU-PEN-BLUE.") >= {"d-1002", "sku-pen-blue"}


def test_a_listing_keeps_the_items_the_conversation_named_whole():
    history = [user_message("find product"), *exchange("l", "search_products", listing(50), query=""),
               user_message("what does SKU-0031 cost?")]
    result = contents(build_context(history, tool_bytes=2500))["l"]["result"]
    assert result["count"] == 50 and result["items_shown"] == "named"
    assert result["items"] == [listing(50)["items"][31]]
    roomy = contents(build_context(history, tool_bytes=6000))["l"]["result"]
    assert roomy["items"][31] == listing(50)["items"][31] and roomy["items"][30] == {
        "sku": "SKU-0030", "name": "Catalog product number 30 in a long name", "status": "active"}


def test_a_listing_that_names_nothing_is_omitted_rather_than_emptied():
    history = [user_message("find product"), *exchange("l", "search_products", listing(50), query="")]
    assert contents(build_context(history, tool_bytes=2500))["l"]["omitted"] is True


def test_an_omitted_long_draft_names_the_page_call_that_reads_it_again():
    history = [user_message("make it"), *exchange("d", "create_order_draft", draft("D-1", 1, 500), customer_id="C-7"),
               *exchange("e", "get_draft", draft("D-1", 1, 30), draft_id="D-1"),
               *exchange("s", "submit_order", {"order_id": "O-1", "status": "committed", "lines": []},
                         draft_id="D-1", revision=1), user_message("done?")]
    view = contents(build_context(history, budget_tokens=420, tool_bytes=100_000))
    assert view["d"]["reread"] == {"tool": "get_draft",
                                   "arguments": {"draft_id": "D-1", "revision": 1, "offset": 0, "limit": 50}}
    assert view["e"]["reread"] == {"tool": "get_draft", "arguments": {"draft_id": "D-1"}}
