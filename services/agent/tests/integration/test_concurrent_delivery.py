"""Two deliveries of one tool-call command at once (a redelivery racing a person's retry of the same
`call_id`, as `erpilot torture` found at `approval.decide.before_db_commit`): both pass the "already
recorded?" check while the policy query is slow, one insert wins, and the other must answer with the
recorded call instead of failing on the primary key (which dead-lettered the command)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_contracts.approval.v1 import ToolPolicyV1
from erpilot_contracts.erp.v1 import ToolResultV1
from erpilot_platform.refusals import Refused

from .conftest import event_types, new_session

pytestmark = pytest.mark.integration


class SlowPolicyDownstream:
    """Holds every policy query until two are waiting, so both deliveries pass the existence check."""

    def __init__(self) -> None:
        self.waiting = 0
        self.both = asyncio.Event()

    async def policy(self, tool: str) -> ToolPolicyV1:
        self.waiting += 1
        if self.waiting >= 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), 30)
        return ToolPolicyV1(tool=tool, action="allow", roles=[], ttl_seconds=900)

    async def read(self, cmd) -> ToolResultV1:
        return ToolResultV1(outcome="succeeded", result={"sku": cmd.arguments["sku"]})


async def test_two_concurrent_deliveries_of_one_call_record_it_once_and_both_answer(engine, uow):
    service = ToolCallService(uow, SlowPolicyDownstream(), public_url="http://test")
    session_id = await new_session(uow)
    call_id = f"call_{uuid.uuid4().hex}"

    def deliver():
        return service.start(session_id=session_id, owner="alice", tool="get_product",
                             raw_arguments={"sku": "SKU-PAPER-A4"}, call_id=call_id)

    first, second = await asyncio.gather(deliver(), deliver())

    assert first == second and first.status == "finished" and first.outcome == "succeeded"
    assert await event_types(engine, session_id) == ["tool_started", "tool_finished"]  # recorded once, run once


async def test_a_concurrent_delivery_with_another_body_is_still_a_conflict(uow):
    service = ToolCallService(uow, SlowPolicyDownstream(), public_url="http://test")
    session_id = await new_session(uow)
    call_id = f"call_{uuid.uuid4().hex}"

    def deliver(sku: str):
        return service.start(session_id=session_id, owner="alice", tool="get_product",
                             raw_arguments={"sku": sku}, call_id=call_id)

    results = await asyncio.gather(deliver("SKU-PAPER-A4"), deliver("SKU-PAPER-A3"), return_exceptions=True)
    conflicts = [r for r in results if isinstance(r, Refused)]
    assert len(conflicts) == 1 and conflicts[0].code == "idempotency_conflict", results
