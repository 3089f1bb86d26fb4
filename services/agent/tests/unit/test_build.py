"""The agent as ``build`` composes it, on the in-memory tool-call store, a fake of the ERP and the approval
service and the offline model, on faststream's in-memory broker: a tool call (a read) goes through the
registered endpoint (parsing, error policy, reply) without PostgreSQL or NATS. Delivery (acks, redelivery)
is not what this tests: ``TestNatsBroker`` skips it (PITFALLS); the background loops (relay, reconciler,
run resumer) start only with ``serve``."""

from __future__ import annotations

import pytest
from faststream.nats import TestNatsBroker

from erpilot_agent.adapters.models import RulesModel
from erpilot_agent.app import build
from erpilot_agent.settings import AgentSettings
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import StartToolCallV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ToolResultV1
from erpilot_contracts.subjects import COMMANDS_STREAM

from .conftest import OWNER, SESSION
from .test_runs import FakeTools, MemoryStore

pytestmark = pytest.mark.unit


def built(store, downstream):
    return build(AgentSettings(database_url="postgresql://unused/agent"), uow_factory=store.unit_of_work,
                 runs=MemoryStore(FakeTools()), bus=downstream, model=RulesModel())


async def test_a_read_tool_call_runs_through_the_built_endpoint(store, downstream):
    downstream.run_answer = ToolResultV1(outcome="succeeded", result={"sku": "SKU-A"})
    app = built(store, downstream)
    cmd = StartToolCallV1(session_id=SESSION, owner=OWNER, tool="get_product", arguments={"sku": "SKU-A"},
                          call_id="call-read")

    async with TestNatsBroker(app.broker) as broker:
        response = await broker.request(cmd.model_dump(mode="json"), subjects.AGENT_CMD_TOOL_CALL,
                                        stream=COMMANDS_STREAM.name, timeout=5)

    reply = ReplyV1.model_validate_json(response.body)
    assert reply.ok and (reply.data["status"], reply.data["outcome"]) == ("finished", "succeeded")
    assert reply.data["result"] == {"sku": "SKU-A"}
    [sent] = downstream.runs
    assert (sent.tool, sent.arguments, sent.requested_by) == ("get_product", {"sku": "SKU-A"}, OWNER)
    assert store.rows and store.commits > 0  # stored in the substitute unit of work


async def test_a_tool_call_on_someone_elses_session_is_refused(store, downstream):
    app = built(store, downstream)
    cmd = StartToolCallV1(session_id=SESSION, owner="mallory", tool="get_product", arguments={"sku": "SKU-A"},
                          call_id="call-read")

    async with TestNatsBroker(app.broker) as broker:
        response = await broker.request(cmd.model_dump(mode="json"), subjects.AGENT_CMD_TOOL_CALL,
                                        stream=COMMANDS_STREAM.name, timeout=5)

    reply = ReplyV1.model_validate_json(response.body)
    assert not reply.ok and downstream.runs == []
