"""The agent as ``build`` composes it, on the memory unit of work, a fake of the ERP and the approval service's
policy and the offline model, on faststream's in-memory broker: a tool call (a read) goes through the
registered endpoint (parsing, error policy, reply) without PostgreSQL or NATS. Delivery (acks, redelivery)
is not what this tests: ``TestNatsBroker`` skips it (PITFALLS); the background loops (relay, run resumer)
start only with ``serve``."""

from __future__ import annotations

import pytest
from faststream.nats import TestNatsBroker

from erpilot_agent.adapters.models import RulesModel
from erpilot_agent.app import build
from erpilot_agent.domain.run_state import Run
from erpilot_agent.settings import AgentSettings
from erpilot_contracts import requests, subjects
from erpilot_contracts.agent.v1 import (
    CancelledRunV1,
    CancelRunV1,
    CreateSessionV1,
    GetSessionV1,
    GetToolCallV1,
    ListSessionsV1,
    PostMessageV1,
    SessionRefV1,
    StartToolCallV1,
    ToolCallViewV1,
)
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ToolResultV1
from erpilot_contracts.sessions.v1 import GetSessionEventsV1
from erpilot_contracts.subjects import COMMANDS_STREAM

from ..memory_agent import START, MemoryDriverLocks
from .conftest import OWNER, SESSION

pytestmark = pytest.mark.unit


def built(uow, downstream):
    return build(AgentSettings(database_url="postgresql://unused/agent"), uow=uow, locks=MemoryDriverLocks(),
                 downstream=downstream, model=RulesModel())


async def test_a_read_tool_call_runs_through_the_built_endpoint(uow, downstream):
    downstream.run_answer = ToolResultV1(outcome="succeeded", result={"sku": "SKU-A"})
    app = built(uow, downstream)
    cmd = StartToolCallV1(session_id=SESSION, owner=OWNER, tool="get_product", arguments={"sku": "SKU-A"},
                          call_id="call-read", assertion="as-1")

    async with TestNatsBroker(app.broker) as broker:
        response = await broker.request(cmd.model_dump(mode="json"), subjects.AGENT_REQ_TOOL_CALL, timeout=5)

    reply = ReplyV1.model_validate_json(response.body)
    assert ToolCallViewV1.model_validate(reply.data).call_id == "call-read"  # the declared reply model
    assert reply.ok and (reply.data["status"], reply.data["outcome"]) == ("finished", "succeeded")
    assert reply.data["result"] == {"sku": "SKU-A"}
    [sent] = downstream.runs
    assert (sent.tool, sent.arguments, sent.requested_by, sent.assertion) == (
        "get_product", {"sku": "SKU-A"}, OWNER, "as-1")
    assert uow.state.calls and uow.event_types(SESSION) == ["tool_started", "tool_finished"]  # the substitute


async def test_a_tool_call_on_someone_elses_session_is_refused(uow, downstream):
    app = built(uow, downstream)
    cmd = StartToolCallV1(session_id=SESSION, owner="mallory", tool="get_product", arguments={"sku": "SKU-A"},
                          call_id="call-read")

    async with TestNatsBroker(app.broker) as broker:
        response = await broker.request(cmd.model_dump(mode="json"), subjects.AGENT_REQ_TOOL_CALL, timeout=5)

    reply = ReplyV1.model_validate_json(response.body)
    assert not reply.ok and (reply.error.code, reply.error.status) == ("not_found", 404) and downstream.runs == []


async def test_every_agent_endpoint_answers_its_declared_reply_model(uow, downstream):
    app = built(uow, downstream)
    uow.state.runs["run_w"] = Run("run_w", SESSION, OWNER, "waiting", message_id="m-0", created_at=START,
                                  updated_at=START)
    asked = {
        requests.AGENT_CREATE_SESSION: CreateSessionV1(session_id="ses_new", owner=OWNER, title="paper"),
        requests.AGENT_POST_MESSAGE: PostMessageV1(session_id="ses_new", owner=OWNER, text="hello",
                                                   message_id="m-1", assertion="as-1"),
        requests.AGENT_CANCEL_RUN: CancelRunV1(session_id=SESSION, owner=OWNER, run_id="run_w"),
        requests.AGENT_SESSIONS: ListSessionsV1(owner=OWNER),
        requests.AGENT_SESSION: GetSessionV1(session_id=SESSION, owner=OWNER),
        requests.AGENT_TOOL_CALL: StartToolCallV1(session_id=SESSION, owner=OWNER, tool="get_product",
                                                  arguments={"sku": "SKU-A"}, call_id="c-1"),
        requests.AGENT_TOOL_CALL_VIEW: GetToolCallV1(session_id=SESSION, owner=OWNER, call_id="c-1"),
        requests.AGENT_EVENTS: GetSessionEventsV1(session_id=SESSION, owner=OWNER, after_seq=1),
    }
    assert set(asked) == {e for e in requests.ALL if ".agent." in e.subject}
    answers = {}
    async with TestNatsBroker(app.broker) as broker:
        for endpoint, request in asked.items():
            stream = {"stream": COMMANDS_STREAM.name} if endpoint.durable else {}
            response = await broker.request(request.model_dump(mode="json"), endpoint.subject, timeout=5, **stream)
            reply = ReplyV1.model_validate_json(response.body)
            assert reply.ok, (endpoint.subject, reply.error)
            answers[endpoint] = endpoint.reply.model_validate(reply.data)

    assert answers[requests.AGENT_CREATE_SESSION] == SessionRefV1(session_id="ses_new")
    assert answers[requests.AGENT_POST_MESSAGE].run_id.startswith("run_")
    assert answers[requests.AGENT_CANCEL_RUN] == CancelledRunV1(run_id="run_w", pending_ids=[])
    assert [s.session_id for s in answers[requests.AGENT_SESSIONS].items] == ["ses_new", SESSION]  # newest first
    assert [r.status for r in answers[requests.AGENT_SESSION].runs] == ["cancelled"]
    assert answers[requests.AGENT_TOOL_CALL_VIEW] == answers[requests.AGENT_TOOL_CALL]
    assert [e.seq for e in answers[requests.AGENT_EVENTS].events][:1] == [2]  # after seq 1, the read's events
