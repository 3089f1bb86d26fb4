"""Exactly one effect per request while NATS delivers every message three times.

A duplicate injector (``duplicates.py``) re-publishes every message on ``erpilot.v1.>`` (commands,
outbox events, session events, queries) once at once and once up to 500 ms later, as real second
deliveries. Meanwhile a requester uses every tool, a chat run with the offline ``rules`` model goes
through an approval, an approval is edited and the new version cancelled, and an admin changes a price
twice. Afterwards, once every consumer has handled every copy, the ledger, the approvals and each
session's drafts, tool calls and events show exactly one effect per request.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from erpilot.ops.dlq import list_dead_letters
from tests.e2e.conftest import Api, isolated_stack, wait_for
from tests.e2e.duplicates import DuplicateInjector
from tests.e2e.test_model_runs import run_events, start_run
from tests.e2e.test_write_flow import decide, finished, request_write, stock

pytestmark = pytest.mark.e2e
# What erpilot_platform.endpoints logs when a handler raised or gave a message up.
FAILED = ("handler failed on", "query failed on", "dead-lettered message from", "could not dead-letter")


@pytest.fixture(scope="module")
def duplicated(database_url, tmp_path_factory):
    """A stack of its own (default policy), so the copies meet no other test's traffic."""
    with isolated_stack(database_url, tmp_path_factory.mktemp("duplicated"), {}) as running:
        yield running


def sql(url: str, query: str, *args: Any) -> list[Any]:
    import asyncpg

    async def run() -> list[Any]:
        conn = await asyncpg.connect(re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", url))
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def tool(api: Api, session_id: str, name: str, arguments: dict, **headers: str) -> dict:
    response = api.client.post(f"/v1/sessions/{session_id}/tool-calls", json={"tool": name, "arguments": arguments},
                               headers=headers)
    assert response.status_code == 200 and response.json()["outcome"] == "succeeded", response.text
    return response.json()


def approve(person: Api, requester: Api, session_id: str, name: str, arguments: dict) -> dict:
    pending = request_write(requester, session_id, name, arguments)
    assert decide(person, pending, "approve").status_code == 200
    view = finished(requester, session_id, pending["call_id"], timeout=60)
    assert view["outcome"] == "succeeded", view
    return view["result"]


def every_tool(requester: Api, approver: Api, manager: Api) -> dict[str, Any]:
    """Each of the 15 tools (get_order_task twice, a keyed get_product retried), writes approved."""
    sid = requester.new_session()
    for name, arguments in (("search_customers", {"query": "Nordwind"}), ("search_products", {"query": "paper"}),
                            ("get_product", {"sku": "SKU-PAPER-A3"}), ("get_order", {"order_id": "O-5001"})):
        tool(requester, sid, name, arguments)
    assert tool(requester, sid, "get_order_task", {})["result"]["status"] == "none"
    rev = tool(requester, sid, "create_order_draft",
               {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A3", "qty": 2}]})["result"]
    draft_id = rev["draft_id"]
    for name, arguments in (
            ("update_draft_line", {"item_number": 1, "expected_sku": "SKU-PAPER-A3", "qty": 3}),
            ("add_draft_line", {"sku": "SKU-MARKER-SET", "qty": 1}),
            ("remove_draft_line", {"item_number": 2, "expected_sku": "SKU-MARKER-SET"}),
            ("set_draft_note", {"note": "deliver on Monday"})):
        edit = {"draft_id": draft_id, "base_revision": rev["revision"], **arguments}
        rev = tool(requester, sid, name, edit)["result"]
    assert rev["revision"] == 5 and tool(requester, sid, "get_draft", {"draft_id": draft_id})["result"]["revision"] == 5
    task = tool(requester, sid, "get_order_task", {})["result"]
    assert task["status"] == "ok" and task["draft"]["revision"] == 5, task  # one open draft, not "ambiguous"

    # A client retry with the same Idempotency-Key while every message is duplicated: still one call.
    keyed = [tool(requester, sid, "get_product", {"sku": "SKU-PEN-BLUE"}, **{"Idempotency-Key": f"{sid}-k"})
             for _ in range(2)]
    assert keyed[0] == keyed[1]

    order = approve(approver, requester, sid, "submit_order", {"draft_id": draft_id, "revision": 5})
    cancelled = approve(approver, requester, sid, "cancel_order", {"order_id": order["order_id"], "reason": "dup test"})
    assert cancelled["status"] == "cancelled"
    approve(manager, requester, sid, "adjust_stock", {"sku": "SKU-COFFEE-1KG", "delta": 4, "reason": "found a box"})
    refund = approve(manager, requester, sid, "refund_payment",
                     {"order_id": "O-5001", "amount_minor": 100, "currency": "EUR", "channel": "original"})
    return {"session": sid, "draft": draft_id, "order": order["order_id"], "refund": refund}


def chat_with_approval(requester: Api, approver: Api) -> dict[str, Any]:
    sid = requester.new_session()
    draft_run = start_run(requester, sid, "draft for C-1002: SKU-PEN-BLUE x3")
    drafted = [e for e in run_events(requester, sid, draft_run, timeout=60) if e["type"] == "tool_finished"]
    assert drafted and drafted[-1]["data"]["outcome"] == "succeeded", drafted
    submit_run = start_run(requester, sid, "submit")
    events = run_events(requester, sid, submit_run, end=("approval_pending", "run_failed"), timeout=60)
    [pending] = [e["data"] for e in events if e["type"] == "approval_pending"]
    assert decide(approver, pending, "approve").status_code == 200
    wait_for(lambda: requester.get(f"/v1/sessions/{sid}").json()["run_status"] == "finished", timeout=60)
    return {"session": sid, "runs": [draft_run, submit_run]}


def edit_then_cancel(requester: Api, manager: Api) -> dict[str, Any]:
    sid = requester.new_session()
    first = request_write(requester, sid, "adjust_stock", {"sku": "SKU-PAPER-A4", "delta": 5, "reason": "recount"})
    edited = manager.post(f"/v1/approvals/{first['pending_id']}/edit",
                          {"fingerprint": first["fingerprint"],
                           "arguments": {"sku": "SKU-PAPER-A4", "delta": 7, "reason": "recount"}})
    assert edited.status_code == 201, edited.text
    assert decide(manager, edited.json(), "cancel").status_code == 200
    view = finished(requester, sid, first["call_id"], timeout=60)
    assert view["outcome"] == "not_executed" and view["error"]["code"] == "cancelled"
    return {"session": sid}


def test_every_request_has_exactly_one_effect_when_every_message_is_delivered_three_times(duplicated):
    base = duplicated.base_url
    requester, approver = Api(base, "dup-req", "requester"), Api(base, "dup-appr", "approver")
    manager, admin = Api(base, "dup-mgr", "manager"), Api(base, "dup-admin", "admin", "requester")
    before = {sku: stock(requester, sku) for sku in ("SKU-PAPER-A3", "SKU-PAPER-A4", "SKU-COFFEE-1KG", "SKU-PEN-BLUE")}
    refundable = requester.get("/v1/erp/orders/O-5001").json()

    with DuplicateInjector(duplicated.nats_url) as injector:
        tools = every_tool(requester, approver, manager)
        chat = chat_with_approval(requester, approver)
        edit = edit_then_cancel(requester, manager)
        for price in (1111, 2222):  # a late copy of the first change must not undo the second
            assert admin.client.patch("/v1/erp/products/SKU-MOUSE-ERGO", json={"price_minor": price}).status_code == 200
    assert {"cmd", "evt", "sessions", "query"} <= set(injector.copied), injector.copied
    # Every copy must be handled as a repeat, not survive as an error: a consumer that is not idempotent
    # (an ERP without its inbox claim) fails on a copy's unique key, which a later retry or the ledger's own
    # constraints may hide from the counts below; a failure or a dead letter does not go unseen.
    assert failures(duplicated) == []
    assert dead_letters(duplicated) == []

    sessions = [tools["session"], chat["session"], edit["session"]]
    url = duplicated.database_url

    # The ledger: one committed operation per approved write, one order per submit, one refund.
    operations = Counter((r["session_id"], r["tool"], r["status"]) for r in sql(
        url, "select session_id, tool, status from erp.operations where session_id = any($1)", sessions))
    assert operations == Counter({
        (tools["session"], "submit_order", "committed"): 1, (tools["session"], "cancel_order", "committed"): 1,
        (tools["session"], "adjust_stock", "committed"): 1, (tools["session"], "refund_payment", "committed"): 1,
        (chat["session"], "submit_order", "committed"): 1,
        (edit["session"], "adjust_stock", "prepared"): 2,  # the first version and its edit, neither committed
    })
    assert len(sql(url, "select 1 from erp.orders where session_id = any($1)", sessions)) == 2
    assert len(sql(url, "select 1 from erp.consumed_grants g join erp.operations o using (operation_id) "
                        "where o.session_id = any($1)", sessions)) == 5
    assert [r["amount_minor"] for r in sql(url, "select amount_minor from erp.refunds where order_id = 'O-5001' "
                                                "and operation_id is not null")] == [100]
    assert requester.get("/v1/erp/orders/O-5001").json()["refunded_minor"] == refundable["refunded_minor"] + 100
    assert {sku: stock(requester, sku) for sku in before} == {
        **before, "SKU-COFFEE-1KG": before["SKU-COFFEE-1KG"] + 4, "SKU-PEN-BLUE": before["SKU-PEN-BLUE"] - 3}
    assert requester.get("/v1/erp/products/SKU-MOUSE-ERGO").json()["price_minor"] == 2222

    # Drafts: one per create_order_draft, with exactly one revision per draft tool call.
    drafts = sql(url, "select d.session_id, count(r.*) as revisions from erp.drafts d join erp.draft_revisions r "
                      "using (draft_id) where d.session_id = any($1) group by d.draft_id, d.session_id", sessions)
    assert sorted((r["session_id"], r["revisions"]) for r in drafts) == sorted(
        [(tools["session"], 5), (chat["session"], 1)])

    # Approvals: one per write request (the edit is a second version), one decision each.
    approvals = Counter((r["session_id"], r["status"]) for r in sql(
        url, "select session_id, status from approval.approvals where session_id = any($1)", sessions))
    assert approvals == Counter({(tools["session"], "approved"): 4, (chat["session"], "approved"): 1,
                                 (edit["session"], "superseded"): 1, (edit["session"], "cancelled"): 1})
    decisions = sql(url, "select a.pending_id, count(d.*) as n from approval.approvals a left join "
                         "approval.decisions d using (pending_id) where a.session_id = any($1) group by a.pending_id",
                    sessions)
    assert [r["n"] for r in decisions] == [1] * 7

    # The agent: every call once, each with one start and one finish; runs started once; seq gap-free.
    calls = Counter(r["session_id"] for r in sql(
        url, "select session_id from agent.tool_calls where session_id = any($1)", sessions))
    assert calls[tools["session"]] == 17 and calls[edit["session"]] == 1
    runs = sql(url, "select run_id, status from agent.runs where session_id = $1 order by created_at", chat["session"])
    assert [(r["run_id"], r["status"]) for r in runs] == [(run_id, "finished") for run_id in chat["runs"]]
    for sid in sessions:
        events = sql(url, "select seq, type, data from agent.session_events where session_id = $1 order by seq", sid)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        per_call = Counter((e["type"], _data(e)["call_id"]) for e in events if "call_id" in _data(e))
        call_ids = {call_id for _, call_id in per_call}
        assert len(call_ids) == calls[sid]
        for call_id in call_ids:
            assert per_call[("tool_started", call_id)] == per_call[("tool_finished", call_id)] == 1, (sid, per_call)
        pendings = Counter(_data(e)["pending_id"] for e in events if e["type"] == "approval_pending")
        assert set(pendings.values()) <= {1}
        types = Counter(e["type"] for e in events)
        assert types["run_started"] == types["run_finished"] == len(chat["runs"] if sid == chat["session"] else [])
    # The stream a person watches shows each of those events once, in order.
    seen = requester.events(chat["session"], until=lambda evs: evs[-1]["type"] == "run_finished"
                            and evs[-1]["data"]["run_id"] == chat["runs"][-1])
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))


def failures(stack: Any) -> list[str]:
    """The lines of every service's log saying a handler or query failed, or a message was dead-lettered."""
    found = []
    for path in sorted((stack.data_dir / "logs").glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if any(said in line for said in FAILED):
                said = json.loads(line) if line.startswith("{") else {"msg": line}
                found.append(f"{path.stem}: {said['msg'][:200]} {said.get('exc', '').strip().splitlines()[-1:]}")
    return found


def dead_letters(stack: Any) -> list[str]:
    """What the dead-letter stream holds: each letter's original subject and reason."""
    import nats

    async def read() -> list[str]:
        nc = await nats.connect(stack.nats_url)
        try:
            letters = await list_dead_letters(nc.jetstream(), limit=100)
            return [f"{letter.original_subject}: {letter.reason}" for letter in letters]
        finally:
            await nc.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read()).result()


def _data(event: Any) -> dict:
    data = event["data"]
    return json.loads(data) if isinstance(data, str) else data
