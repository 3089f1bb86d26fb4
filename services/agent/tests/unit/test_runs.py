"""The model loop of a run, driven on the memory unit of work (``tests/fakes.py``: the run records are the
service layer's own, ``run_records``), a fake of the tool-call pipeline and a scripted model (no I/O).

The SQL repositories under the same records are exercised by ``repository_cases`` and end to end in
tests/e2e/test_model_runs.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from erpilot_agent.adapters.models import RulesModel, openai_tools
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.history import Entry
from erpilot_agent.domain.runs import ModelError, ModelReply, ModelToolCall, RetryBudget
from erpilot_agent.domain.tool_calls import PendingApproval, ToolCall
from erpilot_agent.service_layer.run_ports import CallStatus
from erpilot_agent.service_layer.runs import RunService
from erpilot_contracts.agent.v1 import CancelRunV1, PostMessageV1, RunCancelledV1
from erpilot_contracts.subjects import AGENT_EVT_RUN_CANCELLED
from erpilot_contracts.tools.v1 import TOOLS, InvalidArguments, UnknownTool, normalise
from erpilot_platform.refusals import Refused

from ..memory_agent import START, MemoryAgent, MemoryDriverLocks

pytestmark = pytest.mark.unit

SESSION = "ses_1"
OWNER = "alice"
PRODUCT = {"sku": "SKU-PEN-BLUE", "name": "Ballpoint pen blue, box of 50", "status": "active",
           "price_minor": 1450, "currency": "EUR", "on_hand": 85}


class FakeTools:
    """The tool-call pipeline as the run driver sees it, recording calls in the memory unit of work: reads
    and drafts finish at once with ``results[tool]``; writes wait for approval ``pa_<call_id>`` until
    ``finish_write``."""

    def __init__(self, results: dict[str, dict] | None = None, *, denied: frozenset[str] = frozenset()):
        self.results = results or {}
        self.denied = denied
        self.uow: MemoryAgent | None = None  # the harness's
        self.calls: dict[str, dict[str, Any]] = {}  # call_id -> {tool, arguments, run_id, assertion}
        self.starts: list[str] = []  # every start() that recorded or advanced a call
        self.fail_next_start = 0
        self.approval_known = True  # False: a write stays preparing (its evt.approval.requested not here yet)
        self.on_finished: Callable[[str], Any] | None = None

    async def start(self, *, run, call_id: str, tool: str, arguments: Any) -> None:
        if self.fail_next_start:
            self.fail_next_start -= 1
            raise ConnectionError("ERP away")
        if call_id in self.calls:
            self.starts.append(call_id)
            return
        try:
            normalised = normalise(tool, arguments)
        except UnknownTool:
            raise Refused("unknown_tool", f"unknown tool {tool!r}", 422) from None
        except InvalidArguments as exc:
            raise Refused("invalid_arguments", "bad arguments", 422, errors=exc.errors) from None
        if tool in self.denied:
            raise Refused("policy_denied", f"the policy denies {tool}", 403)
        self.starts.append(call_id)
        self.calls[call_id] = {"tool": tool, "arguments": normalised, "run_id": run.run_id,
                               "assertion": run.assertion}
        call = ToolCall(call_id, tool, normalised)
        call.start()
        if TOOLS[tool].kind.value == "write":
            if self.approval_known:
                call.await_approval(PendingApproval(f"pa_{call_id}", "fp", START + timedelta(minutes=15), {},
                                                    "url"))
        else:
            call.finish("succeeded", result=self.results.get(tool, {"ok": True}))

        async def record(unit):
            await unit.calls.add(call_key=call_key(run.session_id, call_id), call_id=call_id,
                                 session_id=run.session_id, run_id=run.run_id, source="model", request_hash="h",
                                 operation_id=f"op_{call_id}", assertion=run.assertion, call=call)

        await self.uow.run(record)

    async def status(self, session_id: str, call_ids: list[str]) -> dict[str, CallStatus]:
        found = {}
        for call_id in call_ids:
            record = self.uow.state.calls.get(call_key(session_id, call_id))
            if record is not None:
                live = record.call.model_content()
                found[call_id] = CallStatus(record.call.state.value,
                                            live if record.call.state.value == "finished" else None, live)
        return found

    async def denied_tools(self) -> frozenset[str]:
        return self.denied

    async def finish_write(self, call_id: str, *, result: dict | None = None, not_executed: str | None = None,
                           comment: str | None = None) -> None:
        """The person decided (and the ERP committed, for ``result``): the call finishes."""
        key = call_key(SESSION, call_id)

        async def finish(unit):
            record = await unit.calls.get(key, lock=True)
            call = record.call
            events = call.resolve(f"pa_{call_id}", "approved" if result is not None else not_executed,
                                  decided_by="mgr", comment=comment)
            if result is not None:
                events += call.finish("succeeded", result=result)
            await unit.calls.save(key, call, events=events)

        await self.uow.run(finish)
        if self.on_finished:
            await self.on_finished(key)


class ScriptedModel:
    """Answers with the next scripted reply (a ModelReply, a ModelError to raise, or a callable)."""

    name = "scripted"

    def __init__(self, *replies: Any):
        self.replies = list(replies)
        self.requests: list[list[Entry]] = []
        self.tools_seen: list[list[dict]] = []

    async def complete(self, messages: list[Entry], tools: list[dict]) -> ModelReply:
        self.requests.append(json.loads(json.dumps(messages)))
        self.tools_seen.append(tools)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if callable(reply):
            reply = reply(messages)
        if isinstance(reply, BaseException):
            raise reply
        await asyncio.sleep(0)
        return reply


def text(answer: str) -> ModelReply:
    return ModelReply(answer)


def calls(*items: tuple[str, str, Any]) -> ModelReply:
    return ModelReply(None, [ModelToolCall(call_id, name, arguments) for call_id, name, arguments in items])


def fails(code: str = "model_error") -> ModelError:
    return ModelError(code, "scripted failure")


# --- the harness ------------------------------------------------------------------------------

class Reply:
    """What ``post`` answers: the run id, or the refusal."""

    def __init__(self, run_id: str | None = None, refusal: Refused | None = None):
        self.run_id, self.refusal = run_id, refusal
        self.ok = refusal is None


class Harness:
    def __init__(self, model: Any, *, tools: FakeTools | None = None, budget_tokens: int = 32000,
                 max_steps: int = 12, retry: RetryBudget | None = None):
        self.uow = MemoryAgent({SESSION: OWNER})
        self.tools = tools or FakeTools({"get_product": PRODUCT, "search_products": {"items": [PRODUCT]}})
        self.tools.uow = self.uow
        self.locks = MemoryDriverLocks()
        self.model = model
        self.service = RunService(self.uow, self.locks, self.tools, model, tool_specs=openai_tools(),
                                  budget_tokens=budget_tokens, tool_bytes=4096, max_steps=max_steps,
                                  system_prompt="SYSTEM PROMPT", retry=retry, clock=self.uow.clock)
        self.tools.on_finished = self.service.on_call_finished

    async def post(self, text_: str, message_id: str = "m1", assertion: str | None = "as-1") -> Reply:
        try:
            reply = await self.service.post_message(PostMessageV1(session_id=SESSION, owner=OWNER,
                                                                  message_id=message_id, text=text_,
                                                                  assertion=assertion))
        except Refused as refusal:
            return Reply(refusal=refusal)
        await self.service.wait_idle()
        return Reply(reply.run_id)

    def run(self, run_id: str):
        return self.uow.state.runs[run_id]

    def entries(self) -> list[Entry]:
        return [item.entry for item in self.uow.state.history.get(SESSION, [])]

    def event_types(self) -> list[str]:
        return self.uow.event_types(SESSION)

    def at(self, seconds: float) -> None:
        self.uow.time = START + timedelta(seconds=seconds)


def tool_results(messages: list[Entry]) -> dict[str, dict]:
    return {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}


# --- tests ------------------------------------------------------------------------------------

async def test_a_text_answer_finishes_the_run_and_the_model_saw_prompt_and_message_verbatim():
    model = ScriptedModel(text("Hello!"))
    h = Harness(model)

    reply = await h.post("  Grüß dich — «hi»\n")

    run_id = reply.run_id
    assert h.run(run_id).status == "finished" and h.run(run_id).steps == 1
    [request] = model.requests
    assert request == [{"role": "system", "content": "SYSTEM PROMPT"},
                       {"role": "user", "content": "  Grüß dich — «hi»\n"}]
    assert [t["function"]["name"] for t in model.tools_seen[0]] == list(TOOLS)
    assert h.entries()[-1] == {"role": "assistant", "content": "Hello!"}
    assert h.event_types() == ["message", "run_started", "message", "run_finished"]


async def test_the_assistant_message_with_call_ids_is_stored_before_the_call_runs():
    seen_history: list[list[Entry]] = []
    h = Harness(ScriptedModel(calls(("c1", "get_product", '{"sku": "SKU-PEN-BLUE"}')), text("Pen: 14.50 EUR")))
    original_start = h.tools.start

    async def spying_start(**kwargs):
        seen_history.append(h.entries())
        await original_start(**kwargs)

    h.tools.start = spying_start
    run_id = (await h.post("price of the pen?")).run_id

    call_id = f"{run_id}:c1"
    assert seen_history[0][-1]["tool_calls"][0]["id"] == call_id
    assert h.tools.calls[call_id]["arguments"] == {"sku": "SKU-PEN-BLUE"}
    assert seen_history[0][-1]["tool_calls"][0]["model_id"] == "c1"
    second = h.model.requests[1]
    assert second[-2]["tool_calls"][0] == {"id": "c1", "type": "function", "function": {
        "name": "get_product", "arguments": '{"sku": "SKU-PEN-BLUE"}'}}  # the model's id, no model_id key
    assert tool_results(second) == {"c1": {"status": "succeeded", "result": PRODUCT}}
    assert h.run(run_id).status == "finished"


async def test_parallel_tool_calls_all_run_and_all_results_go_back_together():
    h = Harness(ScriptedModel(
        calls(("a", "get_product", {"sku": "SKU-PEN-BLUE"}), ("b", "search_products", {"query": "pen"})),
        text("done")))

    run_id = (await h.post("look up two things")).run_id

    assert sorted(h.tools.starts) == [f"{run_id}:a", f"{run_id}:b"]
    second = h.model.requests[1]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in second[2]["tool_calls"]] == ["a", "b"]  # the ids the model issued
    assert [m["tool_call_id"] for m in second[3:]] == ["a", "b"]
    assert h.run(run_id).status == "finished"


async def test_the_model_gets_back_exactly_the_ids_it_issued_across_runs_and_parallel_calls():
    h = Harness(ScriptedModel(
        calls(("toolu_01ABC", "get_product", {"sku": "SKU-PEN-BLUE"}), ("call_0", "search_products", {"query": "pen"})),
        text("found both"),
        calls(("call_0", "get_product", {"sku": "SKU-PEN-BLUE"})),  # the same id again, in the next run
        text("found it again")))

    first = (await h.post("two lookups", message_id="m1")).run_id
    second = (await h.post("one more", message_id="m2")).run_id

    # the ledger keeps globally unique ids ...
    assert set(h.tools.calls) == {f"{first}:toolu_01ABC", f"{first}:call_0", f"{second}:call_0"}
    # ... and the model sees only its own, each result right after the call that asked for it
    last = h.model.requests[-1]
    sent_ids = [[c["id"] for c in m["tool_calls"]] if m["role"] == "assistant" and m.get("tool_calls")
                else m.get("tool_call_id") for m in last]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "tool", "assistant", "user",
                                         "assistant", "tool"]
    assert sent_ids == [None, None, ["toolu_01ABC", "call_0"], "toolu_01ABC", "call_0", None, None,
                        ["call_0"], "call_0"]
    assert json.loads(last[4]["content"])["result"] == {"items": [PRODUCT]}  # run 1's call_0: the search
    assert json.loads(last[8]["content"])["result"] == PRODUCT  # run 2's call_0: the product
    assert not any("model_id" in c for m in last for c in m.get("tool_calls") or [])
    assert all(":" not in str(i) for ids in sent_ids for i in (ids if isinstance(ids, list) else [ids]))


async def test_bad_calls_from_the_model_become_error_results_and_the_run_goes_on():
    h = Harness(ScriptedModel(
        calls(("x1", "get_product", "{not json"), ("x2", "drop_tables", {}),
              ("x3", "get_product", {"sku": 42}), ("x4", "adjust_stock", {"sku": "S", "delta": 1, "reason": "r"})),
        text("I could not do that.")),
        tools=FakeTools(denied=frozenset({"adjust_stock"})))

    run_id = (await h.post("do odd things")).run_id

    results = tool_results(h.model.requests[1])
    assert results["x1"]["error"]["code"] == "invalid_arguments"
    assert results["x2"] == {"status": "failed",
                             "error": {"code": "unknown_tool", "message": "unknown tool 'drop_tables'"}}
    assert results["x3"]["error"]["code"] == "invalid_arguments"
    assert results["x3"]["error"]["errors"][0]["loc"] == ["sku"]
    assert results["x4"]["status"] == "not_executed" and results["x4"]["reason"] == "policy_denied"
    assert set(results) == {"x1", "x2", "x3", "x4"}
    assert h.tools.starts == []  # nothing was recorded or executed
    assert h.run(run_id).status == "finished"


async def test_a_write_makes_the_run_wait_durably_and_its_result_resumes_it():
    h = Harness(ScriptedModel(calls(("w", "submit_order", {"draft_id": "D-1", "revision": 2})),
                              text("Order O-9 placed.")))

    run_id = (await h.post("submit")).run_id
    call_id = f"{run_id}:w"
    assert h.run(run_id).status == "waiting"
    assert len(h.model.requests) == 1

    await h.service.drive(run_id)  # e.g. the resumer, or another replica: nothing to do yet
    assert len(h.model.requests) == 1 and h.tools.starts == [call_id]

    order = {"order_id": "O-9", "status": "placed"}
    await h.tools.finish_write(call_id, result=order)
    await h.service.wait_idle()

    assert h.run(run_id).status == "finished"
    assert tool_results(h.model.requests[1]) == {"w": {"status": "succeeded", "result": order}}
    assert h.tools.starts == [call_id]


async def test_a_rejected_write_gives_the_model_not_executed_with_the_comment():
    h = Harness(ScriptedModel(calls(("w", "cancel_order", {"order_id": "O-1"})), text("Not cancelled.")))
    run_id = (await h.post("cancel order O-1")).run_id

    content = {"status": "not_executed", "reason": "rejected", "comment": "customer called back"}
    await h.tools.finish_write(f"{run_id}:w", not_executed="rejected", comment="customer called back")
    await h.service.wait_idle()

    assert tool_results(h.model.requests[1])["w"] == content
    assert h.run(run_id).status == "finished"


async def test_a_redelivered_message_does_not_start_a_second_run():
    h = Harness(ScriptedModel(text("hi")))
    first = await h.post("hello", message_id="m-same")
    again = await h.post("hello", message_id="m-same")

    assert first.run_id == again.run_id
    assert len(h.uow.state.runs) == 1 and len(h.model.requests) == 1


@pytest.mark.parametrize("code", ["model_error", "model_timeout"])
async def test_a_model_failure_fails_the_run_with_its_code_and_runs_nothing(code):
    h = Harness(ScriptedModel(fails(code)))
    run_id = (await h.post("hello")).run_id

    assert h.run(run_id).status == "failed" and h.run(run_id).error["code"] == code
    assert h.event_types()[-1] == "run_failed" and h.tools.starts == []
    assert (await h.post("again", message_id="m2")).ok  # the session is free again


async def test_an_empty_model_answer_is_a_model_error():
    h = Harness(ScriptedModel(ModelReply("  ")))
    run_id = (await h.post("hello")).run_id
    assert h.run(run_id).error["code"] == "model_error"


async def test_a_model_that_never_stops_calling_tools_fails_with_max_steps():
    h = Harness(ScriptedModel(calls(("loop", "get_product", {"sku": "SKU-PEN-BLUE"}))), max_steps=3)
    run_id = (await h.post("loop forever")).run_id

    assert h.run(run_id).status == "failed" and h.run(run_id).error["code"] == "max_steps"
    assert len(h.model.requests) == 3
    # The model reused its id every time; each call still got its own global id.
    assert len(set(h.tools.starts)) == 3


async def test_a_history_over_budget_fails_with_context_overflow_before_asking_the_model():
    h = Harness(ScriptedModel(text("never")), budget_tokens=10)
    run_id = (await h.post("a message that cannot be dropped " * 4)).run_id

    assert h.run(run_id).error["code"] == "context_overflow"
    assert h.model.requests == []
    assert h.entries()[0]["content"].startswith("a message that cannot be dropped")


async def test_after_a_crash_between_storing_the_calls_and_running_them_each_call_runs_once():
    h = Harness(ScriptedModel(calls(("a", "get_product", {"sku": "SKU-PEN-BLUE"}),
                                    ("b", "get_product", {"sku": "SKU-PAPER-A4"})), text("done")))
    h.tools.fail_next_start = 2  # the ERP is away: both starts fail, the run stays "running"
    run_id = (await h.post("two reads")).run_id
    assert h.run(run_id).status == "running" and h.tools.calls == {}
    assert len(h.model.requests) == 1

    assert await h.service.resume_stale(stale_seconds=0) == 1
    await h.service.wait_idle()

    assert sorted(h.tools.starts) == [f"{run_id}:a", f"{run_id}:b"]
    assert len(h.model.requests) == 2  # the model was not asked again for the same step
    assert h.run(run_id).status == "finished"


async def test_the_resumer_looks_every_second_while_a_run_is_running_and_rarely_when_none_is():
    from erpilot_agent.service_layer.runs import RESUMER_ACTIVE_SECONDS, resume_pass
    from erpilot_platform.loops import Soon

    h = Harness(ScriptedModel(calls(("a", "get_product", {"sku": "SKU-PEN-BLUE"})), text("done")))
    assert await resume_pass(h.service, stale_seconds=0) is None  # no run at all: the idle interval
    h.tools.fail_next_start = 1  # the ERP is away: the run stays "running", its retry due after a back-off
    run_id = (await h.post("a read")).run_id
    await h.service.wait_idle()
    assert h.run(run_id).status == "running" and h.service.drive_failed.is_set()  # the resumer is woken
    assert await resume_pass(h.service, stale_seconds=3600) == Soon(RESUMER_ACTIVE_SECONDS)  # not due, running
    assert await resume_pass(h.service, stale_seconds=0) == Soon(RESUMER_ACTIVE_SECONDS)  # due: resumed
    await h.service.wait_idle()
    assert h.run(run_id).status == "finished"
    assert await resume_pass(h.service, stale_seconds=0) is None


async def resume(h: Harness, run_id: str) -> None:
    assert await h.service.resume_stale(stale_seconds=0) == 1
    await h.service.wait_idle()


async def test_a_run_whose_downstream_stays_away_fails_with_retries_exhausted_after_its_attempts():
    h = Harness(ScriptedModel(calls(("a", "get_product", {"sku": "SKU-PEN-BLUE"})), text("done")),
                retry=RetryBudget(max_attempts=3, max_seconds=3600))
    h.tools.fail_next_start = 1000  # the ERP never comes back
    run_id = (await h.post("price?")).run_id  # attempt 1
    await resume(h, run_id)  # attempt 2
    assert h.run(run_id).status == "running" and h.run(run_id).failed_attempts == 2

    await resume(h, run_id)  # attempt 3: the budget is spent

    assert h.run(run_id).status == "failed"
    error = h.run(run_id).error
    assert error["code"] == "retries_exhausted"
    assert "3 failed attempts" in error["message"] and "ConnectionError('ERP away')" in error["message"]
    assert h.uow.events_of(SESSION, "run_failed") == [{"run_id": run_id, "error": error}]
    assert await h.service.resume_stale(stale_seconds=0) == 0  # never retried again
    assert len(h.model.requests) == 1


async def test_a_run_also_gives_up_after_its_time_and_progress_starts_the_count_again():
    h = Harness(ScriptedModel(calls(("a", "get_product", {"sku": "SKU-PEN-BLUE"})),
                              calls(("b", "get_product", {"sku": "SKU-PAPER-A4"})), text("done"),
                              calls(("c", "get_product", {"sku": "SKU-PAPER-A4"})), text("done")),
                retry=RetryBudget(max_attempts=100, max_seconds=60))
    h.tools.fail_next_start = 2
    run_id = (await h.post("price?")).run_id
    h.at(50)
    await resume(h, run_id)  # still failing, 50 s in
    assert h.run(run_id).failed_attempts == 2
    await resume(h, run_id)  # the ERP is back: the call ran, the model asked for another
    assert h.run(run_id).failed_attempts == 0 and h.tools.starts == [f"{run_id}:a", f"{run_id}:b"]
    assert h.run(run_id).status == "finished"

    h.tools.fail_next_start = 1000
    h.at(150)
    again = (await h.post("price again?", message_id="m2")).run_id
    h.at(200)
    await resume(h, again)
    assert h.run(again).status == "running"  # 50 s after its own first failure
    h.at(260)
    await resume(h, again)
    assert h.run(again).status == "failed" and h.run(again).error["code"] == "retries_exhausted"
    assert "over 110s" in h.run(again).error["message"]


async def test_resuming_a_finished_or_locked_run_does_nothing():
    h = Harness(ScriptedModel(text("hi")))
    run_id = (await h.post("hello")).run_id
    await h.service.drive(run_id)
    assert len(h.model.requests) == 1

    h2 = Harness(ScriptedModel(text("hi")))
    h2.locks.held.add(SESSION)  # another replica drives this session
    run2 = (await h2.post("hello")).run_id
    assert h2.model.requests == [] and h2.run(run2).status == "running"


async def test_the_rules_model_answers_find_product_with_the_product():
    h = Harness(RulesModel())
    run_id = (await h.post("find product pen")).run_id

    call_id = f"{run_id}:rules-1"
    assert h.tools.calls[call_id]["arguments"] == {"query": "pen"}
    assert h.run(run_id).status == "finished"
    assert "SKU-PEN-BLUE" in h.entries()[-1]["content"]


async def test_the_rules_model_ids_stay_unique_across_runs_of_a_session():
    h = Harness(RulesModel())
    first = (await h.post("show product SKU-PEN-BLUE", message_id="m1")).run_id
    second = (await h.post("show product SKU-PEN-BLUE", message_id="m2")).run_id

    assert set(h.tools.calls) == {f"{first}:rules-1", f"{second}:rules-2"}


# --- runs beside a waiting run (SPEC §9) --------------------------------------------------------

SUBMIT = ("w1", "submit_order", '{"draft_id": "D-1", "revision": 1}')


async def test_a_message_while_a_run_waits_starts_a_run_beside_it_that_sees_the_pending_call():
    model = ScriptedModel(calls(SUBMIT), text("Pen: 14.50 EUR"))
    h = Harness(model)
    first = (await h.post("submit it")).run_id
    assert h.run(first).status == "waiting"

    second = await h.post("what does a pen cost?", message_id="m2")

    assert second.ok and second.run_id != first
    assert h.run(second.run_id).status == "finished"
    assert h.run(first).status == "waiting"  # still with the approver
    results = tool_results(model.requests[-1])  # under the ids the model issued (SPEC §9)
    pending_call = f"{first}:w1"  # the internal id the ledger and events use
    assert (results["w1"]["status"], results["w1"]["pending_id"]) == ("awaiting_approval", f"pa_{pending_call}")
    assert model.requests[-1][-1] == {"role": "user", "content": "what does a pen cost?"}
    assert not any(item.entry.get("role") == "tool" and item.entry["tool_call_id"] == pending_call
                   for item in h.uow.state.history[SESSION])  # the state was shown, never stored as the call's result


async def test_a_message_while_a_run_is_working_is_still_run_in_progress():
    h = Harness(ScriptedModel(text("ok")))
    first, _ = await h.service.store.start_run(session_id=SESSION, owner=OWNER, message_id="m1",
                                               text="first")  # not driven yet

    reply = await h.post("second", message_id="m2")

    assert (reply.refusal.code, reply.refusal.status) == ("run_in_progress", 409)
    assert reply.refusal.details == {"run_id": first, "run_status": "running"}


async def test_the_same_message_id_with_another_text_is_a_conflict_and_an_unknown_session_not_found():
    h = Harness(ScriptedModel(text("ok")))
    await h.post("first", message_id="m1")

    assert (await h.post("other", message_id="m1")).refusal.code == "idempotency_conflict"
    with pytest.raises(Refused) as refused:
        await h.service.post_message(PostMessageV1(session_id=SESSION, owner="mallory", message_id="m9", text="x"))
    assert (refused.value.code, refused.value.status) == ("not_found", 404)


async def test_a_run_takes_the_id_the_gateway_fixed_and_a_repeat_of_its_message_keeps_it():
    """Issue #32: the run's requester assertion is bound to the run id the gateway chose, so the agent starts the
    run under that id (its calls are ``<run_id>:…``); a repeat of the message answers the same run."""
    h = Harness(ScriptedModel(text("ok")))
    started = await h.service.post_message(PostMessageV1(session_id=SESSION, owner=OWNER, message_id="m1",
                                                         text="hi", run_id="run_from_gateway", assertion="as-1"))
    again = await h.service.post_message(PostMessageV1(session_id=SESSION, owner=OWNER, message_id="m1",
                                                       text="hi", run_id="run_from_gateway", assertion="as-1"))
    await h.service.wait_idle()

    assert started.run_id == again.run_id == "run_from_gateway"
    assert h.run("run_from_gateway").assertion == "as-1"


def cancel(run_id: str, owner: str = OWNER) -> CancelRunV1:
    return CancelRunV1(session_id=SESSION, owner=owner, run_id=run_id, assertion="as-cancel")


async def test_cancelling_a_waiting_run_ends_it_records_the_withdrawal_and_names_its_pending_approvals():
    model = ScriptedModel(calls(SUBMIT), text("never asked"))
    h = Harness(model)
    run_id = (await h.post("submit it")).run_id
    [call_id] = list(h.tools.calls)

    reply = await h.service.cancel(cancel(run_id))

    assert (reply.run_id, reply.status, reply.pending_ids) == (run_id, "cancelled", [f"pa_{call_id}"])
    [withdrawal] = h.uow.sent_on(AGENT_EVT_RUN_CANCELLED)  # the one path to the approval service
    event = RunCancelledV1.model_validate(withdrawal)
    assert (event.run_id, event.owner, event.call_ids, event.assertion) == (run_id, OWNER, [call_id], "as-cancel")
    assert [m.msg_id for m in h.uow.sent if m.subject == AGENT_EVT_RUN_CANCELLED] == [f"run_cancelled:{run_id}"]
    assert h.uow.state.sessions[SESSION].active_run_id is None
    await h.tools.finish_write(call_id, not_executed="withdrawn")
    await h.service.wait_idle()
    assert h.run(run_id).status == "cancelled" and len(model.requests) == 1  # no further step
    again = await h.service.cancel(cancel(run_id))
    assert again.pending_ids == [] and len(h.uow.sent_on(AGENT_EVT_RUN_CANCELLED)) == 1  # recorded once
    assert h.event_types().count("run_failed") == 1


async def test_a_cancel_names_a_write_still_being_prepared_though_it_has_no_approval_to_withdraw_yet():
    h = Harness(ScriptedModel(calls(SUBMIT), text("never asked")))
    h.tools.approval_known = False
    run_id = (await h.post("submit it")).run_id
    [call_id] = list(h.tools.calls)
    assert h.run(run_id).status == "waiting"  # the write is with the ERP and the approval service

    reply = await h.service.cancel(cancel(run_id))

    assert reply.pending_ids == []
    assert RunCancelledV1.model_validate(h.uow.sent_on(AGENT_EVT_RUN_CANCELLED)[0]).call_ids == [call_id]


async def test_a_run_that_is_working_over_or_not_the_callers_cannot_be_cancelled_and_records_nothing():
    h = Harness(ScriptedModel(calls(SUBMIT), text("done")))
    waiting = (await h.post("submit it")).run_id
    working, _ = await h.service.store.start_run(session_id=SESSION, owner=OWNER, message_id="m2", text="hi")

    async def refusal(cmd: CancelRunV1) -> tuple[str, int]:
        with pytest.raises(Refused) as refused:
            await h.service.cancel(cmd)
        return refused.value.code, refused.value.status

    assert await refusal(cancel(working)) == ("run_in_progress", 409)
    assert await refusal(cancel(waiting, owner="mallory")) == ("not_found", 404)
    assert await refusal(cancel("run_unknown")) == ("not_found", 404)
    await h.service.store.finish(working)
    assert await refusal(cancel(working)) == ("run_not_waiting", 409)
    assert h.uow.sent_on(AGENT_EVT_RUN_CANCELLED) == [] and h.run(waiting).status == "waiting"


async def test_every_call_of_a_run_carries_the_assertion_of_the_message_that_started_it():
    h = Harness(ScriptedModel(calls(("a", "get_product", {"sku": "SKU-PEN-BLUE"}), SUBMIT), text("done")))

    run_id = (await h.post("look and submit", assertion="as-run")).run_id

    assert h.run(run_id).assertion == "as-run"
    assert {c["assertion"] for c in h.tools.calls.values()} == {"as-run"}


async def test_the_model_is_not_offered_the_tools_the_policy_denies():
    model = ScriptedModel(text("ok"))
    h = Harness(model, tools=FakeTools(denied=frozenset({"refund_payment", "adjust_stock"})))

    await h.post("hi")

    offered = [t["function"]["name"] for t in model.tools_seen[0]]
    assert offered == [name for name in TOOLS if name not in {"refund_payment", "adjust_stock"}]
