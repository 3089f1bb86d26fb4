"""What the gateway sends the agent, and how it answers from it:

- a tool call, a message and a cancel carry the gateway's requester assertion for the caller (the verified token's
  ``sub`` and roles) in that command's session, bound to that call or to that run (SPEC §10, §11), signed only
  after the session was found to be the caller's; creating a session carries none;
- the 202 of a write tool call names its approval: the gateway watches the session's events from before it sends
  the command, and when the agent answers ``running`` it answers from that call's ``approval_pending`` (or
  ``tool_finished``), else, after its bound, from one look at the call;
- a cancel sends no withdrawal of its own (the approval service acts on the agent's record of the cancel), tells
  the approval service first that the run ended for standing approvals (``cmd.approval.end_run``: not through the
  agent, which holds the run's assertion), and answers each approval's status as its owner reads it, waiting a
  bounded time for none to be pending.

The gateway runs in-process with its services replaced by a fake that records every request.
"""

from __future__ import annotations

import re
import time
from typing import Any

import jwt
import pytest

from erpilot_contracts import subjects
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_gateway.problems import Problem
from erpilot_gateway.routes import sessions
from erpilot_platform.assertions import DEFAULT_TTL, TOOL_CALL_TTL, AssertionRefused, verify_assertion
from erpilot_platform.grants import load_verify_key
from erpilot_platform.testing.previews import preview_json

from .fake_services import ASSERTION_KEYS, RecordingServices, gateway_client, sending

pytestmark = pytest.mark.unit

SECRET = "gateway-test-secret-" + "z" * 32
VERIFY_KEY = load_verify_key(ASSERTION_KEYS["ERPILOT_ASSERTION_VERIFY_KEY"])
WRITE = {"tool": "adjust_stock", "arguments": {"sku": "SKU-PEN-BLUE", "delta": 1, "reason": "found"}}
PENDING = {"pending_id": "pa_1", "fingerprint": "sha256:" + "ab" * 32, "expires_at": "2026-10-01T12:15:00+00:00",
           "approval_url": "http://127.0.0.1:8000/resume/pa_1",
           "preview": preview_json("Adjust stock", "SKU-1", "SKU-1")}


def token(sub: str = "alice", roles: tuple[str, ...] = ("requester", "approver")) -> str:
    return jwt.encode({"sub": sub, "roles": list(roles), "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")


def view(payload: Any, status: str, **changes: Any) -> dict:
    return {"call_id": payload.call_id, "session_id": payload.session_id, "tool": payload.tool,
            "arguments": payload.arguments, "status": status, **changes}


class Stack:
    """The fake services with a settable agent answer, the session's events and the approvals' statuses."""

    def __init__(self) -> None:
        self.call_status = "running"
        self.agent_lies = False  # a compromised agent: every session is whoever asks
        self.cancel_refused: Problem | None = None  # the agent's answer to a cancel, when not a cancel
        self.script: list[dict] = []
        self.approvals: dict[str, list[str]] = {}  # pending_id -> the statuses successive reads see
        self.services = RecordingServices(self.answer, timeout=0.3, events=lambda session_id: list(self.script))
        self.client = gateway_client(self.services, SECRET)

    def answer(self, subject: str, payload: Any) -> dict:
        if subject == subjects.AGENT_QUERY_SESSION:  # the owner check before signing: every session is alice's
            if payload.owner != "alice" and not self.agent_lies:
                raise Problem(404, "not_found", f"session {payload.session_id} not found")
            return {"session_id": payload.session_id, "owner": "alice", "created_at": "2026-10-01T12:00:00Z",
                    "last_seq": 0, "run_status": "idle"}
        if subject == subjects.AGENT_CMD_CREATE_SESSION:
            return {"session_id": payload.session_id}
        if subject == subjects.AGENT_CMD_POST_MESSAGE:
            return {"run_id": "run_11111111111111111111111111111111"}
        if subject == subjects.AGENT_CMD_CANCEL_RUN:
            if self.cancel_refused:
                raise self.cancel_refused
            return {"run_id": payload.run_id, "status": "cancelled", "pending_ids": list(self.approvals)}
        if subject == subjects.APPROVAL_CMD_END_RUN:
            return {"session_id": payload.session_id, "run_id": payload.run_id, "standing_approved": 0,
                    "ended_at": "2026-10-01T12:00:00Z", "ended_by": payload.owner}
        if subject == subjects.AGENT_REQ_TOOL_CALL:
            return view(payload, self.call_status)
        if subject == subjects.AGENT_QUERY_TOOL_CALL:
            return {"call_id": payload.call_id, "session_id": payload.session_id, "tool": WRITE["tool"],
                    "arguments": WRITE["arguments"], "status": "running"}
        if subject == subjects.APPROVAL_QUERY_GET:
            seen = self.approvals[payload.pending_id]
            status = seen.pop(0) if len(seen) > 1 else seen[0]
            return {"pending_id": payload.pending_id, "call_id": "c", "session_id": "ses_1", "tool": "adjust_stock",
                    "arguments": {}, "fingerprint": "f", "operation_id": "o", "risk": "r", "preview": preview_json(),
                    "required_roles": [], "requested_by": payload.actor.sub, "created_at": "2026-10-01T12:00:00Z",
                    "expires_at": "2026-10-01T12:15:00Z", "status": status, "policy_version": "p"}
        raise AssertionError(f"unexpected {subject}")

    def post(self, path: str, body: dict, *, who: str = "alice",
             key: str | None = None) -> tuple[Any, list[tuple[str, Any]]]:
        headers = {"Authorization": f"Bearer {token(who)}"} | ({"Idempotency-Key": key} if key else {})
        return sending(self.services, lambda: self.client.post(path, json=body, headers=headers))


def owner_checked(queries: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The queries after the owner check each first signing in a session starts with."""
    assert queries[:1] == [] or queries[0][0] == subjects.AGENT_QUERY_SESSION
    return queries[1:]


@pytest.fixture
def stack() -> Stack:
    return Stack()


def test_each_command_to_the_agent_carries_an_assertion_bound_to_its_own_call_or_run(stack):
    stack.call_status = "finished"
    created, [(_, create)] = stack.post("/v1/sessions", {})
    session_id = created.json()["session_id"]
    _, [(_, call)] = stack.post(f"/v1/sessions/{session_id}/tool-calls",
                                {"tool": "get_product", "arguments": {"sku": "SKU-PEN-BLUE"}})
    _, [(_, message)] = stack.post(f"/v1/sessions/{session_id}/messages", {"text": "hi"}, key="m-1")
    _, [(_, ended), (_, cancel)] = stack.post(f"/v1/sessions/{session_id}/runs/{message.run_id}/cancel", {})

    assert create.assertion is None  # creating a session vouches for nothing
    bound = ((call, {"call_id": call.call_id, "tool": call.tool}),
             (message, {"call_id": f"{message.run_id}:call_0", "tool": "adjust_stock"}),
             (cancel, {"run_id": message.run_id}), (ended, {"run_id": message.run_id}))
    for cmd, covered in bound:
        requester = verify_assertion(cmd.assertion, VERIFY_KEY, session_id=session_id, sub="alice", **covered)
        assert requester.roles == ("requester", "approver") and cmd.owner == "alice"
    lifetimes = [(r.expires_at - r.issued_at) for r in (
        verify_assertion(call.assertion, VERIFY_KEY, session_id=session_id, call_id=call.call_id, tool=call.tool),
        verify_assertion(cancel.assertion, VERIFY_KEY, session_id=session_id, run_id=message.run_id),
        verify_assertion(message.assertion, VERIFY_KEY, session_id=session_id, call_id=f"{message.run_id}:1",
                         tool="adjust_stock"))]
    assert lifetimes == [TOOL_CALL_TTL, TOOL_CALL_TTL, DEFAULT_TTL]  # a direct call's and a cancel's: seconds
    for cmd, other in ((call, {"call_id": "another-call", "tool": call.tool}),
                       (call, {"call_id": call.call_id, "tool": "adjust_stock"}),  # a read's, for a write
                       (message, {"call_id": "call_0", "tool": "adjust_stock"}),
                       (call, {"run_id": call.call_id}), (cancel, {"run_id": "run_2"}),
                       (message, {"run_id": message.run_id}),  # a run's assertion withdraws nothing
                       # a cancel's prepares nothing (security review: the URL's run id is the caller's word)
                       (cancel, {"call_id": f"{message.run_id}:1", "tool": "adjust_stock"})):
        with pytest.raises(AssertionRefused) as refused:
            verify_assertion(cmd.assertion, VERIFY_KEY, session_id=session_id, **other)
        assert refused.value.reason == "assertion_call_mismatch"


def test_a_message_starts_the_run_the_gateway_named_and_a_retry_names_the_same_one(stack):
    _, [(_, first)] = stack.post("/v1/sessions/ses_1/messages", {"text": "hi"}, key="m-1")
    _, [(_, again)] = stack.post("/v1/sessions/ses_1/messages", {"text": "hi"}, key="m-1")
    _, [(_, other)] = stack.post("/v1/sessions/ses_1/messages", {"text": "hi"}, key="m-2")
    _, [(_, elsewhere)] = stack.post("/v1/sessions/ses_2/messages", {"text": "hi"}, key="m-1")

    assert first.run_id == again.run_id and first.run_id.startswith("run_")
    assert len({first.run_id, other.run_id, elsewhere.run_id}) == 3


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/sessions/ses_1/tool-calls", {**WRITE, "call_id": "c-9"}),
    ("/v1/sessions/ses_1/messages", {"text": "hi"}),
    ("/v1/sessions/ses_1/runs/run_11111111111111111111111111111111/cancel", {}),
])
def test_nothing_is_signed_or_sent_for_a_session_that_is_not_the_callers(stack, path, body):
    """Issue #32: the gateway checks the session is the caller's before it signs; a session's owner is looked up
    once, then kept."""
    response, sent = stack.post(path, body, who="mallory")
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert sent == [] and [subject for subject, _ in stack.services.queries] == [subjects.AGENT_QUERY_SESSION]

    stack.post(path, body)
    stack.post(path, body)
    owner_checks = [query for subject, query in stack.services.queries if subject == subjects.AGENT_QUERY_SESSION]
    assert [query.owner for query in owner_checks] == ["mallory", "alice"]  # alice's answer is kept
    again, sent = stack.post(path, body, who="mallory")
    assert again.status_code == 404 and sent == []  # from what was kept: no hop


@pytest.mark.parametrize(("path", "body"), [
    ("tool-calls", {**WRITE, "call_id": "c-9"}),
    ("messages", {"text": "hi"}),
    ("runs/run_11111111111111111111111111111111/cancel", {}),
])
def test_a_session_the_gateway_bound_to_its_owner_is_checked_by_its_mac_not_by_the_agents_word(stack, path, body):
    """Security review of #32: the agent (its answer, or a row it updated) names mallory the owner of alice's
    session; the gateway signs nothing for mallory there, and asks the agent nothing for either of them."""
    created, _ = stack.post("/v1/sessions", {})
    session_id = created.json()["session_id"]
    assert re.fullmatch(r"ses_[0-9a-f]{20}_[0-9a-f]{32}", session_id)
    stack.agent_lies = True

    response, sent = stack.post(f"/v1/sessions/{session_id}/{path}", body, who="mallory")
    assert (response.status_code, response.json()["code"], sent) == (404, "not_found", [])
    _, sent = stack.post(f"/v1/sessions/{session_id}/{path}", body)
    assert {cmd.owner for _, cmd in sent} == {"alice"}  # a cancel: to the approval service and to the agent
    assert all(subject != subjects.AGENT_QUERY_SESSION for subject, _ in stack.services.queries)  # no hop

    # the same id with another MAC, or one for mallory's own name, is nobody's
    forged = session_id[:-1] + ("0" if session_id[-1] != "0" else "1")
    response, sent = stack.post(f"/v1/sessions/{forged}/{path}", body)
    assert (response.status_code, sent) == (404, [])


def test_a_legacy_session_id_without_a_mac_is_still_checked_by_asking_the_agent(stack):
    response, sent = stack.post("/v1/sessions/ses_0123456789abcdef0123/tool-calls", {**WRITE, "call_id": "c-8"})
    assert response.status_code in (200, 202) and [cmd.owner for _, cmd in sent] == ["alice"]
    assert stack.services.queries[0][0] == subjects.AGENT_QUERY_SESSION


@pytest.mark.parametrize("session_id", ["*", ">", "a.b", "ses 1", "s%C3%A9s"])
def test_a_session_id_that_cannot_be_a_subject_token_is_not_found_and_nothing_is_watched_or_sent(stack, session_id):
    response, sent = stack.post(f"/v1/sessions/{session_id}/tool-calls", {**WRITE, "call_id": "c-0"})
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert sent == [] and stack.services.log == []  # `*` would have watched every session's events


def test_a_write_answered_running_is_answered_from_its_approval_pending(stack):
    stack.script = [
        {"type": "tool_started", "data": {"call_id": "c-1"}},
        {"type": "approval_pending", "data": {"call_id": "someone-else", **PENDING, "pending_id": "pa_other"}},
        {"type": "approval_pending", "data": {"call_id": "c-1", **PENDING}},
    ]
    response, [(subject, _)] = stack.post("/v1/sessions/ses_1/tool-calls", {**WRITE, "call_id": "c-1"})

    assert subject == subjects.AGENT_REQ_TOOL_CALL
    assert response.status_code == 202, response.text
    assert response.json() == {"call_id": "c-1", "status": "awaiting_approval", **PENDING,
                               "expires_at": "2026-10-01T12:15:00Z"}
    assert stack.services.log == [f"send {subjects.AGENT_QUERY_SESSION}",  # the owner check, before signing
                                  "watch ses_1", f"send {subjects.AGENT_REQ_TOOL_CALL}", "unwatch ses_1"]
    assert owner_checked(stack.services.queries) == []  # answered from the event alone


def test_a_write_the_policy_refuses_after_the_agents_answer_is_answered_from_its_tool_finished(stack):
    stack.script = [{"type": "tool_finished", "data": {"call_id": "c-2", "outcome": "failed",
                                                       "error": {"code": "policy_denied", "message": "denied"}}}]
    response, _ = stack.post("/v1/sessions/ses_1/tool-calls", {**WRITE, "call_id": "c-2"})

    assert response.status_code == 200
    assert response.json() == {"call_id": "c-2", "status": "finished", "outcome": "failed", "result": None,
                               "error": {"code": "policy_denied", "message": "denied"}}


def test_without_an_event_in_time_the_call_is_looked_at_once_and_answered_as_it_stands(stack):
    stack.script = [{"type": "approval_pending", "data": {"call_id": "another-call", **PENDING}}]
    started = time.monotonic()
    response, _ = stack.post("/v1/sessions/ses_1/tool-calls", {**WRITE, "call_id": "c-3"})

    assert time.monotonic() - started < 2.0  # bounded by the request timeout (0.3 s here)
    assert (response.status_code, response.json()) == (202, {"call_id": "c-3", "status": "running"})
    [(subject, query)] = owner_checked(stack.services.queries)
    assert (subject, query.call_id, query.owner) == (subjects.AGENT_QUERY_TOOL_CALL, "c-3", "alice")


@pytest.mark.parametrize("status", ["awaiting_approval", "finished"])
def test_an_answer_that_already_says_it_all_is_given_at_once(stack, status):
    stack.call_status = status
    stack.script = [{"type": "approval_pending", "data": {"call_id": "c-4", **PENDING, "pending_id": "pa_late"}}]
    response, _ = stack.post("/v1/sessions/ses_1/tool-calls", {**WRITE, "call_id": "c-4"})

    assert response.json()["status"] == status and response.json().get("pending_id") != "pa_late"
    assert owner_checked(stack.services.queries) == []


def test_a_cancel_sends_no_withdrawal_and_answers_each_approval_once_none_is_pending(stack, monkeypatch):
    stack.approvals = {"pa_1": ["pending", "pending", "withdrawn"], "pa_2": ["approved"]}
    run_id = stack.services.run_id("ses_1", "m-1")  # a run this gateway started there
    response, sent = stack.post(f"/v1/sessions/ses_1/runs/{run_id}/cancel", {})

    # The approval service hears that the run ended from the gateway before the agent is asked (the agent could
    # withhold its own record of the cancel); the withdrawal itself has one path: the agent's event.
    assert [subject for subject, _ in sent] == [subjects.APPROVAL_CMD_END_RUN, subjects.AGENT_CMD_CANCEL_RUN]
    (_, ended), (_, cancel) = sent
    assert (ended.session_id, ended.run_id, ended.owner, ended.assertion) == (
        "ses_1", run_id, "alice", cancel.assertion)
    assert response.json() == {"run_id": run_id, "status": "cancelled", "approvals": [
        {"pending_id": "pa_1", "status": "withdrawn"}, {"pending_id": "pa_2", "status": "approved"}]}
    reads = [query.pending_id for subject, query in stack.services.queries if subject == subjects.APPROVAL_QUERY_GET]
    assert reads == ["pa_1", "pa_2", "pa_1", "pa_1"]  # only the pending one is read again
    assert all(query.actor.sub == "alice" for _, query in owner_checked(stack.services.queries))  # as the owner


@pytest.mark.parametrize("run_id", ["0", "run_1", "run_" + "G" * 32, "run_" + "a" * 33])
def test_a_cancel_of_what_is_no_run_id_is_404_and_records_nothing(stack, run_id):
    """CI's OpenAPI fuzzing: a cancel of run "0" was 404 from the agent, but the approval service had already
    recorded the run as ended (a standing_runs row and an audit row): a refusal must change nothing."""
    response, sent = stack.post(f"/v1/sessions/ses_1/runs/{run_id}/cancel", {})

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert sent == []


def test_a_cancel_of_a_well_formed_unknown_run_asks_the_agent_first_and_its_404_records_nothing(stack):
    """Security gap of the cancel: a run id of the right shape that no one started (run_ and 32 hex digits) had the
    approval service record a run end (a standing_runs row, an audit row) before the agent answered 404."""
    stack.cancel_refused = Problem(404, "not_found", "no such run")
    response, sent = stack.post("/v1/sessions/ses_1/runs/run_" + "1" * 32 + "/cancel", {})

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert [subject for subject, _ in sent] == [subjects.AGENT_CMD_CANCEL_RUN]  # no cmd.approval.end_run


@pytest.mark.parametrize("refusal", [Problem(409, "run_in_progress", "working"),
                                     Problem(409, "run_not_waiting", "over"),
                                     Problem(503, "service_unavailable", "no answer"),
                                     Problem(404, "session_not_found", "not that 404")])
def test_a_run_the_gateway_cannot_place_is_ended_for_standing_approvals_on_any_answer_but_a_clean_404(stack, refusal):
    """An id the gateway did not make for this session (an earlier version's run) is the agent's to know; any
    answer but its clean 404 (a run it holds, or no answer) ends the run for standing approvals as well."""
    stack.cancel_refused = refusal
    response, sent = stack.post("/v1/sessions/ses_1/runs/run_" + "1" * 32 + "/cancel", {})

    assert (response.status_code, response.json()["code"]) == (refusal.status, refusal.code)
    assert [subject for subject, _ in sent] == [subjects.AGENT_CMD_CANCEL_RUN, subjects.APPROVAL_CMD_END_RUN]
    stack.cancel_refused = None
    _, sent = stack.post("/v1/sessions/ses_1/runs/run_" + "1" * 32 + "/cancel", {})
    assert [subject for subject, _ in sent] == [subjects.AGENT_CMD_CANCEL_RUN, subjects.APPROVAL_CMD_END_RUN]


def test_an_agent_that_denies_a_run_the_gateway_started_keeps_no_standing_approval_alive(stack):
    """The agent is trusted least: for a run this gateway started in the session, its 404 (a lie, or a run it lost)
    comes after the approval service was told that the run ended."""
    stack.cancel_refused = Problem(404, "not_found", "no such run")
    run_id = stack.services.run_id("ses_1", "m-1")
    response, sent = stack.post(f"/v1/sessions/ses_1/runs/{run_id}/cancel", {})

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert [subject for subject, _ in sent] == [subjects.APPROVAL_CMD_END_RUN, subjects.AGENT_CMD_CANCEL_RUN]
    # ... but that run's id in another session is no run of the gateway's there
    _, sent = stack.post(f"/v1/sessions/ses_2/runs/{run_id}/cancel", {})
    assert [subject for subject, _ in sent] == [subjects.AGENT_CMD_CANCEL_RUN]


def test_a_cancel_answers_after_its_bound_even_if_an_approval_stays_pending(stack, monkeypatch):
    monkeypatch.setattr(sessions, "WITHDRAWAL_WAIT_SECONDS", 0.3)
    stack.approvals = {"pa_1": ["pending"]}
    started = time.monotonic()
    response, _ = stack.post("/v1/sessions/ses_1/runs/run_11111111111111111111111111111111/cancel", {})

    assert time.monotonic() - started < 2.0
    assert response.json()["approvals"] == [{"pending_id": "pa_1", "status": "pending"}]


@pytest.mark.parametrize("session_id", ["ses_1.>", "*", "ses 1", "a" * 101])
def test_the_event_stream_of_what_is_no_session_id_is_404_before_anything_is_asked(stack, session_id):
    """Security review: the SSE route took any path segment as a session id and subscribed to its subject (a
    wildcard subscribes to every session's events); it answers 404 as the tool-call routes do."""
    response, sent = sending(stack.services, lambda: stack.client.get(
        f"/v1/sessions/{session_id}/events", headers={"Authorization": f"Bearer {token()}"}))
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert sent == []


def test_a_direct_calls_assertion_names_the_fingerprint_of_its_normalised_arguments(stack):
    """Security review of #32: the ERP compares it with the draft's or the prepare's, so the agent cannot use a
    direct call's assertion for a write with other arguments."""
    _, [(_, call)] = stack.post("/v1/sessions/ses_1/tool-calls", {**WRITE, "call_id": "c-args"})
    requester = verify_assertion(call.assertion, VERIFY_KEY, session_id="ses_1", call_id="c-args", tool=WRITE["tool"])
    assert requester.args == fingerprint(WRITE["tool"], 1, normalise(WRITE["tool"], WRITE["arguments"]))


def test_arguments_the_tool_does_not_take_are_refused_before_anything_is_signed_or_sent(stack):
    response, sent = stack.post("/v1/sessions/ses_1/tool-calls", {"tool": "adjust_stock", "arguments": {"sku": 7}})
    assert (response.status_code, response.json()["code"], sent) == (422, "invalid_arguments", [])
