"""A long chat session under a small context budget, through the rules model (issue 27, SPEC §8, §9).

With ``ERPILOT_CONTEXT_BUDGET_TOKENS=4000``: eleven runs that each list the whole catalog and every
customer (``search_products`` and ``search_customers``, empty query), a run that drafts a 26-line
order, then "show me the catalog once more". The raw history is far above the budget; the view gives
up the listings that later ones repeat (whole pairs, call and result together), shortens old answers and
markers, and keeps the draft's current revision. Before, run 8 of this session failed with
``run_failed`` ``context_overflow`` although the user messages, the system prompt and the draft fit
easily.

The model's view is not visible over HTTP; the rules model's ``show context`` answers with what its
last request held (message count, estimated tokens, the drafts it shows and how many of their lines).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from erpilot.stack.stack import Stack
from tests.e2e.conftest import Api, isolated_stack
from tests.e2e.test_model_runs import assistant_texts, run_events, start_run

pytestmark = pytest.mark.e2e

BUDGET_TOKENS = 4000
LISTING_RUNS = 11
DRAFT_LINES = 26


@pytest.fixture(scope="module")
def small_budget_stack(database_url, tmp_path_factory) -> Iterator[Stack]:
    env = {"ERPILOT_CONTEXT_BUDGET_TOKENS": str(BUDGET_TOKENS)}  # ERPILOT_MODEL unset: the rules model
    with isolated_stack(database_url, tmp_path_factory.mktemp("context-budget"), env) as stack:
        yield stack


def finished_run(api: Api, session_id: str, text: str) -> list[dict]:
    """Post ``text``, wait for its run to end, and require that it finished; the run's events."""
    run_id = start_run(api, session_id, text)
    events = run_events(api, session_id, run_id, timeout=60)
    begun = next(i for i, e in enumerate(events) if e["type"] == "run_started" and e["data"]["run_id"] == run_id)
    own = events[begun:]
    failed = [e["data"] for e in own if e["type"] == "run_failed"]
    assert not failed and own[-1]["type"] == "run_finished", (text[:40], failed)
    return own


def test_a_long_session_of_listings_and_a_26_line_draft_fits_a_4000_token_budget(small_budget_stack: Stack):
    api = Api(small_budget_stack.base_url, f"ctx-{time.monotonic_ns()}", "requester")
    session_id = api.new_session()
    catalog = api.get("/v1/erp/products").json()["items"]
    customers = api.get("/v1/erp/customers").json()["items"]
    active = [product for product in catalog if product["status"] == "active"]
    assert len(active) >= DRAFT_LINES and customers

    for _ in range(LISTING_RUNS):
        events = finished_run(api, session_id, "find products and customers")
        started = sorted((e["data"]["tool"], e["data"]["arguments"]["query"]) for e in events
                         if e["type"] == "tool_started")  # side by side: in either order
        assert started == [("search_customers", ""), ("search_products", "")]
        [answer] = assistant_texts(events)
        assert f"Found {len(catalog)} product(s)" in answer and f"Found {len(customers)} customer(s)" in answer

    lines = [{"sku": product["sku"], "qty": n % 5 + 1} for n, product in enumerate(active[:DRAFT_LINES])]
    events = finished_run(api, session_id, "draft for C-1001: " + ", ".join(f"{x['sku']} x{x['qty']}" for x in lines))
    [created] = [e["data"] for e in events if e["type"] == "tool_finished"]
    assert created["outcome"] == "succeeded", created
    draft = created["result"]
    assert draft["revision"] == 1 and [(x["sku"], x["qty"]) for x in draft["lines"]] == [
        (x["sku"], x["qty"]) for x in lines]

    events = finished_run(api, session_id, "show me the catalog once more")
    assert [e["data"]["tool"] for e in events if e["type"] == "tool_started"] == ["search_products"]
    assert f"Found {len(catalog)} product(s)" in assistant_texts(events)[-1]

    # What the model's request held: within the budget, with the draft's current revision, every line.
    [report] = assistant_texts(finished_run(api, session_id, "show context"))
    tokens = int(re.search(r"~(\d+) tokens", report)[1])
    assert tokens <= BUDGET_TOKENS, report
    assert f"{draft['draft_id']} revision 1: {DRAFT_LINES} of {DRAFT_LINES} line(s)" in report, report
    assert f"{LISTING_RUNS + 3} user message(s)" in report, report  # every user message, verbatim count

    view = api.get(f"/v1/sessions/{session_id}").json()
    assert view["run_status"] == "finished" and len(view["tool_calls"]) == 2 * LISTING_RUNS + 2
