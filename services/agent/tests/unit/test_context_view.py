"""The context view of SPEC §8: what the model is sent, built from the stored history."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from erpilot_agent.domain.context_view import ContextOverflow, build_context
from erpilot_agent.domain.history import (
    MalformedHistory,
    assistant_message,
    entry_bytes,
    estimate_tokens,
    system_message,
    tool_message,
    user_message,
)

pytestmark = pytest.mark.unit

SYSTEM = "You operate the Erpilot ERP."


def sku_and_qty(item_number: int) -> tuple[str, int]:
    """Non-sequential values, so a test cannot pass by guessing a line from its neighbours."""
    digest = hashlib.sha256(str(item_number).encode()).hexdigest()
    return f"SKU-{digest[:6].upper()}", int(digest[6:10], 16) % 97 + 1


def big_draft(line_count: int = 60, draft_id: str = "D-1002") -> dict:
    lines = []
    for n in range(1, line_count + 1):
        sku, qty = sku_and_qty(n)
        lines.append({"item_number": n, "sku": sku, "name": f"Industrial widget model {n} with long name",
                      "qty": qty, "unit_price_minor": 1999, "discount_pct": 5, "line_total_minor": 1999 * qty,
                      "stock_before": 500 + n})
    return {"draft_id": draft_id, "revision": 4, "customer_id": "C-7", "customer_name": "Müller & Söhne GmbH",
            "note": "deliver before Friday", "currency": "EUR", "total_amount_minor": 123456,
            "valid_until": "2026-11-01T00:00:00Z", "lines": lines}


def call(call_id: str, name: str, **arguments) -> dict:
    return assistant_message(None, [{"id": call_id, "name": name, "arguments": arguments}])


def exchange(call_id: str, name: str, result: dict) -> list[dict]:
    return [call(call_id, name), tool_message(call_id, {"status": "succeeded", "result": result})]


def tool_contents(view: list[dict]) -> dict[str, dict]:
    return {m["tool_call_id"]: json.loads(m["content"]) for m in view if m["role"] == "tool"}


def test_a_small_history_is_sent_unchanged():
    history = [system_message(SYSTEM), user_message("show task"),
               *exchange("c1", "get_order_task", {"status": "none"}), assistant_message("No open draft.")]
    assert build_context(history) == history


def test_the_input_is_never_mutated_and_the_view_is_a_copy():
    history = [system_message(SYSTEM), user_message("show draft D-1002"),
               *exchange("c1", "get_draft", big_draft())]
    before = copy.deepcopy(history)
    view = build_context(history, budget_tokens=2000)
    assert history == before
    view[0]["content"] = "changed"
    view[-1]["content"] = "changed"
    assert history == before


def test_a_large_draft_is_projected_to_valid_json_that_keeps_line_31():
    history = [system_message(SYSTEM), user_message("show draft D-1002"),
               *exchange("c1", "get_draft", big_draft())]
    assert len(history[-1]["content"].encode()) > 4096

    content = tool_contents(build_context(history))["c1"]

    assert content["status"] == "succeeded"
    assert content["projected"] is True and content["refresh_required"] is True
    draft = content["result"]
    assert draft["draft_id"] == "D-1002" and draft["revision"] == 4
    assert draft["customer"] == {"id": "C-7", "name": "Müller & Söhne GmbH"}
    assert draft["note"] == "deliver before Friday"
    assert draft["total_amount_minor"] == 123456 and draft["line_count"] == 60
    sku, qty = sku_and_qty(31)
    assert draft["lines"][30] == {"item_number": 31, "sku": sku, "qty": qty}
    assert [line["item_number"] for line in draft["lines"]] == list(range(1, 61))


def test_projected_content_fits_tool_bytes():
    history = [user_message("show draft"), *exchange("c1", "get_draft", big_draft())]
    view = build_context(history)
    assert len(view[-1]["content"].encode("utf-8")) <= 4096


def test_item_numbers_are_supplied_from_the_position_when_missing():
    draft = big_draft()
    for line in draft["lines"]:
        del line["item_number"]
    history = [user_message("show draft"), *exchange("c1", "create_order_draft", draft)]
    lines = tool_contents(build_context(history))["c1"]["result"]["lines"]
    assert lines[30]["item_number"] == 31 and lines[30]["sku"] == sku_and_qty(31)[0]


def test_a_search_listing_is_reduced_to_ids_names_and_count():
    items = [{"customer_id": f"C-{n}", "name": f"Customer {n}", "discount_pct": 3,
              "address": "Long street name " * 5} for n in range(50)]
    history = [user_message("find customer"), *exchange("c1", "search_customers", {"items": items})]
    result = tool_contents(build_context(history))["c1"]["result"]
    assert result["count"] == 50
    assert result["items"][49] == {"customer_id": "C-49", "name": "Customer 49"}


def test_task_status_and_failures_survive_projection():
    task = {"status": "ok", "draft": big_draft()}
    rejected = {"status": "business_rejected", "error": {"code": "draft_changed", "message": "stale"}}
    history = [user_message("submit"), *exchange("c1", "get_order_task", task),
               call("c2", "get_draft", draft_id="D-1002"), tool_message("c2", rejected)]
    contents = tool_contents(build_context(history, budget_tokens=2000))
    assert contents["c1"]["result"]["status"] == "ok"
    assert contents["c1"]["result"]["draft"]["lines"][30]["sku"] == sku_and_qty(31)[0]
    assert contents["c2"] == rejected


def test_content_that_cannot_fit_is_replaced_by_the_omitted_marker():
    items = [{"sku": f"SKU-{n:04d}", "name": "Zahnrad – Präzisionsausführung " * 3} for n in range(50)]
    history = [user_message("find product"), *exchange("c1", "search_products", {"items": items})]
    original = history[-1]["content"]

    content = tool_contents(build_context(history))["c1"]

    raw = original.encode("utf-8")
    assert content == {"omitted": True, "original_length": len(raw),
                       "sha256": hashlib.sha256(raw).hexdigest(), "refresh_required": True,
                       "call_id": "c1", "reason": "size",
                       "reread": {"tool": "search_products", "arguments": {}}}
    assert len(raw) > len(original)  # the length is counted in UTF-8 bytes, not characters


def test_non_json_content_is_omitted_not_cut():
    history = [user_message("show order O-1"), call("c1", "get_order", order_id="O-1"),
               {"role": "tool", "tool_call_id": "c1", "content": "x" * 5000}]
    content = tool_contents(build_context(history))["c1"]
    assert content["omitted"] is True and content["original_length"] == 5000


def test_call_and_results_stay_together_even_when_stored_apart():
    history = [
        system_message(SYSTEM), user_message("two things"),
        assistant_message(None, [{"id": "a", "name": "get_product", "arguments": {"sku": "S1"}},
                                 {"id": "b", "name": "get_product", "arguments": {"sku": "S2"}}]),
        tool_message("a", {"status": "succeeded", "result": {"sku": "S1"}}),
        user_message("and then?"),
        tool_message("b", {"status": "succeeded", "result": {"sku": "S2"}}),
    ]
    view = build_context(history)
    assert [m["role"] for m in view] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert [m["tool_call_id"] for m in view[3:5]] == ["a", "b"]


def test_the_latest_result_of_a_call_wins():
    history = [user_message("submit"), call("c1", "submit_order", draft_id="D-1", revision=1),
               tool_message("c1", {"status": "awaiting_approval", "pending_id": "P-1"}),
               tool_message("c1", {"status": "not_executed", "reason": "rejected"})]
    view = build_context(history)
    assert [m["role"] for m in view] == ["user", "assistant", "tool"]
    assert json.loads(view[-1]["content"]) == {"status": "not_executed", "reason": "rejected"}


def test_a_call_without_result_gets_a_placeholder():
    history = [user_message("submit"), call("c1", "submit_order", draft_id="D-1", revision=1)]
    view = build_context(history)
    assert view[-1]["tool_call_id"] == "c1"
    assert json.loads(view[-1]["content"])["refresh_required"] is True


def test_a_result_without_its_call_is_refused():
    with pytest.raises(MalformedHistory):
        build_context([user_message("hi"), tool_message("ghost", {"status": "succeeded", "result": {}})])


def three_drafts_history(status: str = "open") -> list[dict]:
    history = [system_message(SYSTEM)]
    for n in (1, 2, 3):
        draft = {**big_draft(12, f"D-{n}"), "status": status}
        history += [user_message(f"show draft D-{n}"), call(f"c{n}", "get_draft", draft_id=f"D-{n}"),
                    tool_message(f"c{n}", {"status": "succeeded", "result": draft})]
    return history


def test_over_budget_older_results_are_projected_first():
    history = three_drafts_history()
    full = estimate_tokens(history)
    contents = tool_contents(build_context(history, budget_tokens=full - 200))
    assert contents["c1"].get("projected") is True
    assert "projected" not in contents["c2"] and "projected" not in contents["c3"]


def reduction(content: dict | None) -> int:
    """0 whole, 1 projected, 2 omitted, 3 tiny marker, 4 left the view (call and result)."""
    if content is None:
        return 4
    if content.get("omitted"):
        return 2 if "sha256" in content else 3
    return 1 if content.get("projected") else 0


def test_reductions_go_oldest_first_down_to_omission_and_the_newest_last():
    history = three_drafts_history(status="submitted")  # no longer open: nothing protects them
    seen = set()
    for budget in range(estimate_tokens(history), 0, -10):
        try:
            view = build_context(history, budget_tokens=budget)
        except ContextOverflow:
            break
        shown = tool_contents(view)
        stages = [reduction(shown.get(call_id)) for call_id in ("c1", "c2", "c3")]
        assert stages[:2] == sorted(stages[:2], reverse=True), (budget, stages)  # older never less reduced
        assert estimate_tokens(view) <= budget
        seen.add(tuple(stages))
    # c3 answers the latest message: reduced last, and it never leaves (the current turn's pair stays).
    assert seen == {(0, 0, 0), (1, 0, 0), (1, 1, 0), (2, 1, 0), (2, 2, 0), (3, 2, 0), (3, 3, 0), (3, 3, 1),
                    (4, 3, 1), (4, 4, 1), (4, 4, 2), (4, 4, 3)}, sorted(seen)


def test_user_messages_and_system_prompt_are_kept_verbatim_under_pressure():
    history = three_drafts_history(status="submitted")
    history.insert(2, user_message("Merke dir: Prüfzeichen ✓-42, nicht vergessen!"))
    view = build_context(history, budget_tokens=200)
    assert [m for m in view if m["role"] in ("system", "user")] == \
           [m for m in history if m["role"] in ("system", "user")]
    assert all(c.get("omitted") for c in tool_contents(view).values())


def test_the_current_revision_of_an_open_draft_is_never_omitted_overflow_instead():
    history = three_drafts_history()  # three open drafts: each one's current revision is protected
    history.insert(2, user_message("Merke dir: Prüfzeichen ✓-42, nicht vergessen!"))
    fits = build_context(history, budget_tokens=650)
    assert [m for m in fits if m["role"] in ("system", "user")] == \
           [m for m in history if m["role"] in ("system", "user")]
    for call_id, draft in tool_contents(fits).items():
        assert "omitted" not in draft and draft["result"]["draft_id"] == f"D-{call_id[1]}"
        assert draft["result"]["revision"] == 4 and draft["result"]["line_count"] == 12
    with pytest.raises(ContextOverflow):  # the user messages, the prompt and the three drafts alone
        build_context(history, budget_tokens=400)


def test_context_overflow_when_protected_messages_exceed_the_budget():
    history = [system_message(SYSTEM), user_message("a" * 4000)]
    with pytest.raises(ContextOverflow) as caught:
        build_context(history, budget_tokens=500)
    assert caught.value.code == "context_overflow"
    assert caught.value.estimated_tokens > 500


def test_the_token_estimate_is_utf8_bytes_of_compact_json_over_four():
    message = user_message("Grüße")
    expected_bytes = len('{"role":"user","content":"Grüße"}'.encode())
    assert entry_bytes(message) == expected_bytes
    assert estimate_tokens([message, message]) == -(-2 * expected_bytes // 4)


def test_the_view_fits_the_budget_it_was_given():
    history = three_drafts_history()
    for budget in (3000, 1500, 800):
        assert estimate_tokens(build_context(history, budget_tokens=budget)) <= budget


def test_a_result_is_never_replaced_by_a_larger_projection():
    tiny = {"sku": "S-1", "name": "Bolt"}
    history = [user_message("show product S-1"), *exchange("c1", "get_product", tiny),
               user_message("show draft D-1002"), *exchange("c2", "get_draft", big_draft(12))]
    contents = tool_contents(build_context(history, budget_tokens=estimate_tokens(history) - 100))
    assert contents["c1"] == {"status": "succeeded", "result": tiny}
    assert contents["c2"]["projected"] is True
