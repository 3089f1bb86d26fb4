"""Runs of the model loop end to end: a message → model → tool calls → answer, over HTTP and SSE.

Two models:
- the offline ``rules`` planner, on the shared e2e stack;
- ``openai:fake-model`` against a scripted OpenAI-compatible server started here, on a stack of its
  own (its own NATS server and database: stacks sharing NATS would share the agent's durable
  consumers, so a message could reach an agent running the other model).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from erpilot.stack.stack import Stack
from tests.e2e.conftest import Api, isolated_stack, wait_for

pytestmark = pytest.mark.e2e


# --- helpers shared with test_agent_crash.py --------------------------------------------------

def post_message(api: Api, session_id: str, text: str, **headers: str) -> Any:
    return api.client.post(f"/v1/sessions/{session_id}/messages", json={"text": text}, headers=headers)


def start_run(api: Api, session_id: str, text: str) -> str:
    response = post_message(api, session_id, text)
    assert response.status_code == 202, response.text
    return response.json()["run_id"]


def run_events(api: Api, session_id: str, run_id: str, *, end: tuple[str, ...] = ("run_finished", "run_failed"),
               timeout: float = 30.0) -> list[dict]:
    """The session's events up to the end of ``run_id`` (or the first event of a type in ``end``)."""
    def ended(events: list[dict]) -> bool:
        return any(e["type"] in end and e["data"].get("run_id", run_id) == run_id for e in events)

    return api.events(session_id, until=ended, timeout=timeout)


def of_run(events: list[dict], run_id: str) -> list[dict]:
    return [e for e in events if e["data"].get("run_id") == run_id
            or str(e["data"].get("call_id", "")).startswith(f"{run_id}:")]


def assistant_texts(events: list[dict]) -> list[str]:
    return [e["data"]["text"] for e in events if e["type"] == "message" and e["data"]["role"] == "assistant"]


# --- the rules model on the shared stack ------------------------------------------------------

def test_rules_model_finds_a_product_and_answers_with_it(requester: Api):
    session_id = requester.new_session()

    run_id = start_run(requester, session_id, "find product pen")
    events = run_events(requester, session_id, run_id)

    assert [e["type"] for e in events] == [
        "message", "run_started", "tool_started", "tool_finished", "message", "run_finished"]
    assert events[0]["data"] == {"role": "user", "text": "find product pen", "run_id": run_id}
    started, finished = events[2]["data"], events[3]["data"]
    assert started["tool"] == "search_products" and started["arguments"] == {"query": "pen"}
    assert started["call_id"] == finished["call_id"] and finished["outcome"] == "succeeded"
    [answer] = assistant_texts(events)
    assert "SKU-PEN-BLUE" in answer and "Ballpoint pen" in answer

    view = requester.get(f"/v1/sessions/{session_id}").json()
    assert view["run_status"] == "finished" and view["active_run_id"] is None
    assert [(m["role"], m["text"]) for m in view["messages"]] == [("user", "find product pen"), ("assistant", answer)]
    assert [c["call_id"] for c in view["tool_calls"]] == [started["call_id"]]
    assert view["runs"] == [{"run_id": run_id, "status": "finished", "error": None,
                             "created_at": view["runs"][0]["created_at"]}]


def test_rules_model_help_and_unknown_text_answer_without_tools(requester: Api):
    session_id = requester.new_session()
    run_id = start_run(requester, session_id, "what can you do?")
    events = run_events(requester, session_id, run_id)
    assert [e["type"] for e in events] == ["message", "run_started", "message", "run_finished"]
    assert "find product" in assistant_texts(events)[0]


def test_a_retried_message_with_the_same_idempotency_key_starts_one_run(requester: Api):
    session_id = requester.new_session()
    first = post_message(requester, session_id, "show product SKU-PAPER-A4", **{"Idempotency-Key": "k-1"})
    again = post_message(requester, session_id, "show product SKU-PAPER-A4", **{"Idempotency-Key": "k-1"})
    other = post_message(requester, session_id, "show product SKU-PAPER-A3", **{"Idempotency-Key": "k-1"})

    assert first.status_code == again.status_code == 202 and first.json() == again.json()
    assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"
    run_events(requester, session_id, first.json()["run_id"])
    assert len(requester.get(f"/v1/sessions/{session_id}").json()["runs"]) == 1


def test_messages_are_private_and_validated(stack, requester: Api):
    session_id = requester.new_session()
    stranger = Api(stack.base_url, "someone-else", "requester")

    assert post_message(stranger, session_id, "find product pen").status_code == 404
    assert requester.post(f"/v1/sessions/{session_id}/messages", {"text": ""}).status_code == 422
    assert requester.post(f"/v1/sessions/{session_id}/messages", {"text": "x", "extra": 1}).status_code == 422
    bad_key = post_message(requester, session_id, "x", **{"Idempotency-Key": "no spaces"})
    assert bad_key.status_code == 422
    assert requester.get(f"/v1/sessions/{session_id}").json()["runs"] == []


def test_rules_model_drafts_then_submit_waits_for_approval(requester: Api):
    """Needs the ERP's draft tools, prepare, and the approval service's request."""
    session_id = requester.new_session()
    draft_run = start_run(requester, session_id, "draft for C-1001: SKU-PAPER-A4 x2")
    events = run_events(requester, session_id, draft_run)
    finished = [e["data"] for e in events if e["type"] == "tool_finished"]
    assert finished and finished[-1]["outcome"] == "succeeded", finished
    draft_id = finished[-1]["result"]["draft_id"]
    assert draft_id in assistant_texts(events)[-1]

    submit_run = start_run(requester, session_id, "submit")
    events = run_events(requester, session_id, submit_run, end=("approval_pending", "run_failed"))
    pending = [e["data"] for e in events if e["type"] == "approval_pending"]
    assert pending, [e["type"] for e in events]
    assert pending[0]["approval_url"].endswith(f"/resume/{pending[0]['pending_id']}")

    # approval_pending is out before the driver lets go of the run and marks it waiting
    view = wait_for(lambda: (v := requester.get(f"/v1/sessions/{session_id}").json())["run_status"] == "waiting"
                    and v, timeout=10)
    assert view["active_run_id"] == submit_run
    assert [p["pending_id"] for p in view["pending_approvals"]] == [pending[0]["pending_id"]]
    beside = post_message(requester, session_id, "show task")  # a waiting run blocks nothing (SPEC §9)
    assert beside.status_code == 202 and beside.json()["run_id"] != submit_run


# --- a scripted OpenAI-compatible model -------------------------------------------------------

def _completion(content: str | None = None, calls: list[tuple[str, str, Any]] | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for call_id, name, args in calls]
    return {"id": f"chatcmpl-{secrets.token_hex(4)}", "object": "chat.completion", "created": int(time.time()),
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _after_last_user(messages: list[dict]) -> list[dict]:
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return messages[last + 1:]


def _scripted(messages: list[dict]) -> tuple[int, Any, float]:
    """(HTTP status, body, delay) for a request, chosen by the last user message's first word."""
    text = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    later = _after_last_user(messages)
    results = [m for m in later if m["role"] == "tool"]
    word = text.split()[0]
    if word == "parallel":
        if not results:
            return 200, _completion("Looking both up.", [("call_0", "get_product", {"sku": "SKU-PEN-BLUE"}),
                                                         ("call_1", "search_customers", {"query": "Nordwind"})]), 0
        product = json.loads(results[0]["content"])["result"]
        customer = json.loads(results[1]["content"])["result"]["items"][0]
        return 200, _completion(f"{product['sku']} costs {product['price_minor']} cents; "
                                f"customer {customer['customer_id']}."), 0
    if word == "ids":  # ids as real providers issue them, repeated across the runs of a session
        if not results:
            ids = [("call_0", "get_product", {"sku": "SKU-PEN-BLUE"})] if "again" in text else [
                ("toolu_01ABC", "get_product", {"sku": "SKU-PEN-BLUE"}),
                ("call_0", "search_customers", {"query": "Nordwind"})]
            return 200, _completion(None, ids), 0
        return 200, _completion(f"ids ok: {len(results)}"), 0
    if word == "badcalls":
        if not results:
            return 200, _completion(None, [("call_0", "get_product", "{not json"), ("call_1", "drop_tables", {}),
                                           ("call_2", "get_product", {"sku": 42})]), 0
        codes = [json.loads(r["content"])["error"]["code"] for r in results]
        return 200, _completion("errors: " + ",".join(codes)), 0
    if word == "everything":
        if not results:
            return 200, _completion(None, [("call_0", "search_products", {"query": ""})]), 0
        return 200, _completion("saw: " + results[0]["content"]), 0
    if word == "loop":
        return 200, _completion(None, [("call_0", "get_product", {"sku": "SKU-PEN-BLUE"})]), 0
    if word == "garbage":
        return 200, "<html>this is not a completion</html>", 0
    if word == "shapeless":
        return 200, {"unexpected": True}, 0
    if word == "broken":
        return 500, {"error": {"message": "the model is on fire", "type": "server_error"}}, 0
    if word == "slow":
        return 200, _completion("slow answer"), 1.5
    if word == "hang":
        return 200, _completion("too late"), 6.0
    return 200, _completion(f"echo: {text}"), 0


_PROVIDER_ID = re.compile(r"^[a-zA-Z0-9_-]+$")  # what Anthropic's API accepts (PITFALLS.md)


def id_problem(messages: list[dict], issued: list[list[str]]) -> str | None:
    """Why a request's tool-call ids are not the ones this server issued (None when they are).

    Every assistant message must carry exactly the ids of one answer the server gave, and the tool
    messages after it must answer exactly those ids, in order.
    """
    expected: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            if not expected or message.get("tool_call_id") != expected.pop(0):
                return f"tool result {message.get('tool_call_id')!r} does not answer the call before it"
            continue
        if expected:
            return f"calls {expected} have no result"
        ids = [call["id"] for call in message.get("tool_calls") or []]
        if ids and ids not in issued:
            return f"tool call ids {ids} were never issued (issued: {issued})"
        if any(not _PROVIDER_ID.match(i) for i in ids):
            return f"String should match pattern '^[a-zA-Z0-9_-]+$': {ids}"
        expected = ids
    return f"calls {expected} have no result" if expected else None


class FakeLLM:
    """An OpenAI-compatible /v1/chat/completions endpoint that records every request it gets.

    Like a strict provider it refuses (HTTP 400) a request whose tool-call ids are not exactly the ones
    it issued; each refusal is kept in ``id_problems``.
    """

    def __init__(self, script: Callable[[list[dict]], tuple[int, Any, float]] = _scripted):
        self.requests: list[dict] = []
        self.script = script
        self.issued: list[list[str]] = []  # the call ids of every answer, in order
        self.id_problems: list[str] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                with outer.lock:
                    problem = id_problem(body["messages"], outer.issued)
                    if problem:
                        outer.id_problems.append(problem)
                        status, answer, delay = 400, {"error": {"message": problem, "type": "invalid_request"}}, 0
                    else:
                        status, answer, delay = outer.script(body["messages"])
                        calls = answer.get("choices", [{}])[0].get("message", {}).get("tool_calls") \
                            if isinstance(answer, dict) else None
                        if calls:
                            outer.issued.append([call["id"] for call in calls])
                time.sleep(delay)
                raw = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/html" if isinstance(answer, str) else "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the agent gave up waiting (the timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def sent_for(self, text: str) -> list[dict]:
        """The requests made while answering the user message ``text``."""
        return [r for r in self.requests
                if next(m["content"] for m in reversed(r["messages"]) if m["role"] == "user") == text]


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    llm = FakeLLM()
    llm.thread.start()
    yield llm
    llm.server.shutdown()
    llm.server.server_close()
    assert llm.id_problems == [], llm.id_problems  # no request ever carried ids the model did not issue


@pytest.fixture(scope="module")
def llm_stack(database_url, tmp_path_factory, fake_llm) -> Iterator[Stack]:
    env = {"ERPILOT_MODEL": "openai:fake-model", "OPENAI_BASE_URL": fake_llm.url, "OPENAI_API_KEY": "sk-test",
           "ERPILOT_MODEL_TIMEOUT_SECONDS": "3", "ERPILOT_MODEL_MAX_RETRIES": "0", "ERPILOT_MAX_STEPS": "4",
           "ERPILOT_RESUME_RUNS_AFTER_SECONDS": "1",
           # small enough to see projection and overflow, large enough for the other scenarios
           "ERPILOT_CONTEXT_TOOL_BYTES": "600", "ERPILOT_CONTEXT_BUDGET_TOKENS": "2500"}
    deny = '[tools.adjust_stock]\naction = "deny"\n'  # not offered to the model (SPEC §9)
    with isolated_stack(database_url, tmp_path_factory.mktemp("llm-stack"), env, policy=deny) as stack:
        yield stack


@pytest.fixture
def user(llm_stack) -> Api:
    return Api(llm_stack.base_url, f"llm-user-{time.monotonic_ns()}", "requester")


def test_the_model_gets_prompt_message_and_tools_and_parallel_calls_come_back_as_results(user: Api, fake_llm):
    session_id = user.new_session()
    text = "parallel  lookups: «pen» & Nordwind —\n please "

    run_id = start_run(user, session_id, text)
    events = run_events(user, session_id, run_id)

    first, second = fake_llm.sent_for(text)
    assert first["path"] == "/v1/chat/completions" and first["model"] == "fake-model"
    assert first["auth"] == "Bearer sk-test"
    assert first["messages"][0]["role"] == "system" and "Erpilot" in first["messages"][0]["content"]
    assert first["messages"][1:] == [{"role": "user", "content": text}]
    catalog = user.get("/v1/tools").json()["items"]
    assert "adjust_stock" not in [t["name"] for t in catalog]  # the policy denies it: left out of both lists
    assert [t["function"]["name"] for t in first["tools"]] == [t["name"] for t in catalog]
    assert all(t["type"] == "function" for t in first["tools"])
    assert [t["function"]["parameters"] for t in first["tools"]] == [t["input_schema"] for t in catalog]
    assert [t["function"]["description"] for t in first["tools"]] == [t["description"] for t in catalog]

    call_ids = [f"{run_id}:call_0", f"{run_id}:call_1"]  # in the ledger and the events
    assistant, *results = second["messages"][2:]
    assert assistant["role"] == "assistant" and [c["id"] for c in assistant["tool_calls"]] == ["call_0", "call_1"]
    assert [r["tool_call_id"] for r in results] == ["call_0", "call_1"]  # to the model: its own ids
    product = json.loads(results[0]["content"])
    assert product["status"] == "succeeded" and product["result"]["sku"] == "SKU-PEN-BLUE"
    assert json.loads(results[1]["content"])["result"]["items"][0]["customer_id"] == "C-1001"

    types = [e["type"] for e in events]
    assert types[:3] == ["message", "run_started", "message"] and types[-2:] == ["message", "run_finished"]
    assert sorted(e["data"]["call_id"] for e in events if e["type"] == "tool_finished") == call_ids
    assert assistant_texts(events) == ["Looking both up.", "SKU-PEN-BLUE costs 1450 cents; customer C-1001."]


def test_the_model_gets_back_exactly_the_tool_call_ids_it_issued_across_runs(user: Api, fake_llm):
    session_id = user.new_session()
    first = start_run(user, session_id, "ids like a provider's")
    first_events = run_events(user, session_id, first)
    second = start_run(user, session_id, "ids again")  # the model issues call_0 once more
    second_events = run_events(user, session_id, second)

    assert assistant_texts(first_events) == ["ids ok: 2"]
    assert assistant_texts(of_run(second_events, second)) == ["ids ok: 1"]
    _, last = fake_llm.sent_for("ids again")
    sent = [(m["role"], [c["id"] for c in m["tool_calls"]] if m.get("tool_calls") else m.get("tool_call_id"))
            for m in last["messages"]]
    assert sent == [("system", None), ("user", None), ("assistant", ["toolu_01ABC", "call_0"]),
                    ("tool", "toolu_01ABC"), ("tool", "call_0"), ("assistant", None), ("user", None),
                    ("assistant", ["call_0"]), ("tool", "call_0")]
    assert json.loads(last["messages"][4]["content"])["result"]["items"][0]["customer_id"] == "C-1001"
    assert json.loads(last["messages"][8]["content"])["result"]["sku"] == "SKU-PEN-BLUE"
    assert not any("model_id" in c for m in last["messages"] for c in m.get("tool_calls") or [])
    # the ledger and the events keep the agent's globally unique ids
    finished = [e["data"]["call_id"] for e in second_events if e["type"] == "tool_finished"]  # the whole session
    assert sorted(finished) == sorted([f"{first}:toolu_01ABC", f"{first}:call_0", f"{second}:call_0"])
    assert fake_llm.id_problems == []


def test_the_next_run_sees_the_whole_history_of_the_session(user: Api, fake_llm):
    session_id = user.new_session()
    first_run = start_run(user, session_id, "parallel again")
    run_events(user, session_id, first_run)
    second_run = start_run(user, session_id, "what did we find?")
    run_events(user, session_id, second_run)

    [request] = fake_llm.sent_for("what did we find?")
    roles = [m["role"] for m in request["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert request["messages"][1] == {"role": "user", "content": "parallel again"}
    assert request["messages"][5]["content"].startswith("SKU-PEN-BLUE costs")


def test_bad_tool_calls_from_the_model_become_error_results_not_a_crash(user: Api, fake_llm):
    session_id = user.new_session()
    run_id = start_run(user, session_id, "badcalls please")
    events = run_events(user, session_id, run_id)

    assert events[-1]["type"] == "run_finished"
    assert assistant_texts(events) == ["errors: invalid_arguments,unknown_tool,invalid_arguments"]
    failed = {e["data"]["call_id"]: e["data"] for e in events if e["type"] == "tool_finished"}
    assert {d["outcome"] for d in failed.values()} == {"failed"}
    assert failed[f"{run_id}:call_1"]["error"]["code"] == "unknown_tool"
    assert user.get(f"/v1/sessions/{session_id}").json()["tool_calls"] == []  # nothing was recorded


def test_a_tool_result_too_large_for_the_context_reaches_the_model_as_the_omitted_marker(user: Api, fake_llm):
    session_id = user.new_session()
    run_id = start_run(user, session_id, "everything you sell")
    run_events(user, session_id, run_id)

    call_id = f"{run_id}:call_0"
    stored = user.get(f"/v1/sessions/{session_id}/tool-calls/{call_id}").json()
    assert len(stored["result"]["items"]) == 30  # the full result is kept; only the model's view is reduced
    original = json.dumps({"status": "succeeded", "result": stored["result"]}, ensure_ascii=False).encode()
    _, second = fake_llm.sent_for("everything you sell")
    [result] = [m for m in second["messages"] if m["role"] == "tool"]
    assert result["tool_call_id"] == "call_0"
    assert json.loads(result["content"]) == {"omitted": True, "original_length": len(original),
                                             "sha256": hashlib.sha256(original).hexdigest(),
                                             "refresh_required": True, "call_id": result["tool_call_id"],
                                             "reason": "size",
                                             "reread": {"tool": "search_products", "arguments": {"query": ""}}}


def test_a_message_that_cannot_fit_the_budget_fails_with_context_overflow(user: Api, fake_llm):
    session_id = user.new_session()
    text = "overflowing " + "x" * 12_000  # ~3000 tokens > ERPILOT_CONTEXT_BUDGET_TOKENS=2500

    run_id = start_run(user, session_id, text)
    events = run_events(user, session_id, run_id)

    assert events[-1]["type"] == "run_failed" and events[-1]["data"]["error"]["code"] == "context_overflow"
    assert fake_llm.sent_for(text) == []  # never sent truncated
    assert events[0]["data"]["text"] == text  # and stored verbatim


@pytest.mark.parametrize(("text", "code"), [("garbage in", "model_error"), ("shapeless answer", "model_error"),
                                            ("broken model", "model_error"), ("hang on", "model_timeout")])
def test_a_failing_model_fails_the_run_with_a_clear_code(user: Api, text, code):
    session_id = user.new_session()
    run_id = start_run(user, session_id, text)
    events = run_events(user, session_id, run_id, timeout=20)

    assert [e["type"] for e in events] == ["message", "run_started", "run_failed"]
    assert events[-1]["data"]["error"]["code"] == code and events[-1]["data"]["error"]["message"]
    view = user.get(f"/v1/sessions/{session_id}").json()
    assert view["run_status"] == "failed" and view["runs"][0]["error"]["code"] == code
    assert start_run(user, session_id, "hello after failure")  # the session takes messages again


def test_a_model_that_never_answers_fails_with_max_steps(user: Api, fake_llm):
    session_id = user.new_session()
    run_id = start_run(user, session_id, "loop forever")
    events = run_events(user, session_id, run_id)

    assert events[-1]["type"] == "run_failed" and events[-1]["data"]["error"]["code"] == "max_steps"
    assert len(fake_llm.sent_for("loop forever")) == 4  # ERPILOT_MAX_STEPS
    finished = [e for e in events if e["type"] == "tool_finished"]
    assert len(finished) == 4 and len({e["data"]["call_id"] for e in finished}) == 4


def test_a_second_message_while_the_model_is_thinking_is_run_in_progress(user: Api):
    session_id = user.new_session()
    run_id = start_run(user, session_id, "slow thinking")

    busy = post_message(user, session_id, "are you there?")
    assert busy.status_code == 409, busy.text
    assert busy.json()["code"] == "run_in_progress"
    assert busy.headers["content-type"].startswith("application/problem+json")
    view = user.get(f"/v1/sessions/{session_id}").json()
    assert view["run_status"] == "running" and view["active_run_id"] == run_id

    events = run_events(user, session_id, run_id)
    assert assistant_texts(events) == ["slow answer"]
    assert start_run(user, session_id, "now you are free")


def test_a_run_left_running_by_a_killed_agent_is_resumed_by_the_next_one(llm_stack: Stack, user: Api, fake_llm):
    session_id = user.new_session()
    text = "slow and interrupted"
    run_id = start_run(user, session_id, text)
    wait_for(lambda: fake_llm.sent_for(text), timeout=10)  # the model is thinking now

    llm_stack.supervisor.kill("agent")  # SIGKILL mid-request: no answer was stored
    llm_stack.supervisor.restart("agent")
    llm_stack.wait_ready()

    events = run_events(user, session_id, run_id)
    assert [e["type"] for e in events] == ["message", "run_started", "message", "run_finished"]
    assert assistant_texts(events) == ["slow answer"]
    assert len(fake_llm.sent_for(text)) == 2  # asked again: nothing had been stored or executed
