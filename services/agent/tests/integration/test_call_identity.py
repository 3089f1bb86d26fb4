"""The identity of a tool call on a real PostgreSQL: a ``call_id`` is unique per session, a repeated or
duplicated command finds the same call (one row, one operation, one set of events), another request
under the same id is a conflict, and nothing about another session's calls is ever revealed.

The ERP and the approval service are replaced by a recording fake of the agent's ``Downstream`` port.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
from pathlib import Path

import pytest
import rfc8785
from sqlalchemy import func, select, text

from erpilot_agent.adapters.downstream import Downstream
from erpilot_agent.adapters.tables import tool_calls
from erpilot_agent.app import MIGRATIONS
from erpilot_agent.domain.call_identity import call_key, operation_id_for
from erpilot_agent.service_layer import sessions
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_contracts.agent.v1 import GetToolCallV1
from erpilot_contracts.approval.v1 import ToolPolicyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, PreparedOperationV1, PrepareOperationV1, PreviewV1, ToolResultV1
from erpilot_platform.refusals import Refused

from .conftest import event_types, new_session

pytestmark = pytest.mark.integration
DRAFT = {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A4", "qty": 2}]}


class RecordingDownstream(Downstream):
    """Answers like the ERP would, and records every command it got."""

    def __init__(self) -> None:
        super().__init__(broker=None)
        self.drafts: list[ExecuteToolV1] = []
        self.prepares: list[PrepareOperationV1] = []

    async def policy(self, tool: str) -> ToolPolicyV1:
        action = "require_approval" if tool == "adjust_stock" else "allow"
        return ToolPolicyV1(tool=tool, action=action, roles=["manager"], ttl_seconds=900)

    async def draft(self, cmd: ExecuteToolV1) -> ToolResultV1:
        self.drafts.append(cmd)
        await asyncio.sleep(0.05)  # let concurrent deliveries overlap
        return ToolResultV1(outcome="succeeded", result={"draft_id": f"D-{cmd.operation_id[-6:]}", "revision": 1})

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        self.prepares.append(cmd)
        return PreparedOperationV1(operation_id=cmd.operation_id, tool=cmd.tool, fingerprint=cmd.fingerprint,
                                   preview=PreviewV1(operation="Adjust stock", object=cmd.arguments["sku"],
                                                     target="stock"))


@pytest.fixture
def downstream() -> RecordingDownstream:
    return RecordingDownstream()


@pytest.fixture
def service(uow, downstream) -> ToolCallService:
    return ToolCallService(uow, downstream, public_url="http://erpilot.test")


async def calls_in(engine, session_id: str) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(tool_calls)
                                 .where(tool_calls.c.session_id == session_id))


def looked_up(session_id: str, owner: str, call_id: str) -> GetToolCallV1:
    return GetToolCallV1(session_id=session_id, owner=owner, call_id=call_id)


async def test_the_same_call_id_in_two_sessions_is_two_calls_and_neither_sees_the_other(uow, service, downstream):
    alice, bob = await new_session(uow, "alice"), await new_session(uow, "bob")

    first = await service.start(session_id=alice, owner="alice", tool="create_order_draft",
                                raw_arguments=DRAFT, call_id="c-1")
    other_args = {"customer_id": "C-1002", "lines": [{"sku": "SKU-PEN-BLUE", "qty": 5}]}
    second = await service.start(session_id=bob, owner="bob", tool="create_order_draft",
                                 raw_arguments=other_args, call_id="c-1")

    assert first.call_id == second.call_id == "c-1"
    assert (first.session_id, second.session_id) == (alice, bob)
    assert first.outcome == second.outcome == "succeeded"
    assert first.arguments["customer_id"] == "C-1001" and second.arguments["customer_id"] == "C-1002"
    assert first.operation_id != second.operation_id
    assert [d.operation_id for d in downstream.drafts] == [first.operation_id, second.operation_id]
    # Each session reads only its own call under that id; an id used only elsewhere is simply unknown.
    mine = await sessions.tool_call_view(uow, looked_up(alice, "alice", "c-1"))
    assert mine.arguments == first.arguments
    await service.start(session_id=bob, owner="bob", tool="create_order_draft", raw_arguments=DRAFT,
                        call_id="only-bob")
    for unknown in (looked_up(alice, "alice", "only-bob"), looked_up(bob, "alice", "c-1")):  # not alice's session
        with pytest.raises(Refused) as refused:
            await sessions.tool_call_view(uow, unknown)
        assert refused.value.code == "not_found"


async def test_an_id_another_session_used_with_another_body_is_no_conflict_here(engine, uow, service, downstream):
    """The answer must not depend on (so cannot reveal) what another session did with the id."""
    alice, bob = await new_session(uow, "alice"), await new_session(uow, "bob")
    await service.start(session_id=bob, owner="bob", tool="create_order_draft", raw_arguments=DRAFT,
                        call_id="shared-id")

    other = {"customer_id": "C-1003", "lines": [{"sku": "SKU-PAPER-A3", "qty": 1}]}

    view = await service.start(session_id=alice, owner="alice", tool="create_order_draft", raw_arguments=other,
                               call_id="shared-id")

    assert view.outcome == "succeeded" and view.session_id == alice
    assert await calls_in(engine, alice) == 1 and await calls_in(engine, bob) == 1
    with pytest.raises(Refused) as refused:  # bob's own session does refuse another body under the id
        await service.start(session_id=bob, owner="bob", tool="create_order_draft", raw_arguments=other,
                            call_id="shared-id")
    assert refused.value.code == "idempotency_conflict" and refused.value.status == 409
    assert alice not in refused.value.message and "alice" not in refused.value.message


async def test_repeating_a_call_answers_that_call_and_another_body_is_a_conflict(engine, uow, service, downstream):
    session_id = await new_session(uow, "alice")
    start = dict(session_id=session_id, owner="alice", tool="create_order_draft", call_id="idem-1")

    first = await service.start(raw_arguments=DRAFT, **start)
    again = await service.start(raw_arguments=DRAFT, **start)
    with pytest.raises(Refused) as conflict:
        await service.start(raw_arguments={**DRAFT, "note": "other"}, **start)
    with pytest.raises(Refused) as stranger:
        await service.start(**{**start, "owner": "mallory"}, raw_arguments=DRAFT)

    assert again == first
    assert conflict.value.code == "idempotency_conflict"
    assert stranger.value.code == "not_found"
    assert len(downstream.drafts) == 1
    assert first.operation_id == operation_id_for(call_key(session_id, "idem-1"))  # fixed by the identity
    assert await event_types(engine, session_id) == ["tool_started", "tool_finished"]


async def test_a_call_recorded_before_the_upgrade_is_still_repeated_and_still_conflicts(
        engine, uow, service, downstream):
    """Rows written before the versioned digest keep their ``sha256:<hex>``: a retry after the upgrade is a repeat."""
    session_id = await new_session(uow, "alice")
    start = dict(session_id=session_id, owner="alice", tool="create_order_draft", call_id="idem-old")
    first = await service.start(raw_arguments=DRAFT, **start)
    asked = rfc8785.dumps({"tool": "create_order_draft", "arguments": DRAFT})
    pre_upgrade = "sha256:" + hashlib.sha256(asked).hexdigest()  # what request_hash stored before
    async with engine.begin() as conn:
        await conn.execute(tool_calls.update().where(tool_calls.c.call_key == call_key(session_id, "idem-old"))
                           .values(request_hash=pre_upgrade))

    again = await service.start(raw_arguments=DRAFT, **start)
    with pytest.raises(Refused) as conflict:
        await service.start(raw_arguments={**DRAFT, "note": "other"}, **start)

    assert again == first and len(downstream.drafts) == 1
    assert (conflict.value.code, conflict.value.status) == ("idempotency_conflict", 409)


async def test_concurrent_deliveries_of_one_command_make_one_call_and_one_operation(engine, uow, service, downstream):
    session_id = await new_session(uow, "alice")

    views = await asyncio.gather(*(
        service.start(session_id=session_id, owner="alice", tool="create_order_draft", raw_arguments=DRAFT,
                      call_id="dup-1") for _ in range(6)))

    assert await calls_in(engine, session_id) == 1
    assert {v.outcome for v in views} == {"succeeded"} and len({v.operation_id for v in views}) == 1
    assert {v.result["draft_id"] for v in views} == {views[0].result["draft_id"]}
    # Deliveries that overlap may each ask the ERP, always for the one operation (idempotent there).
    assert {d.operation_id for d in downstream.drafts} == {views[0].operation_id}
    assert await event_types(engine, session_id) == ["tool_started", "tool_finished"]


async def test_a_duplicated_write_is_recorded_once_and_prepares_one_operation(engine, uow, service, downstream):
    session_id = await new_session(uow, "alice")
    arguments = {"sku": "SKU-PAPER-A4", "delta": 3, "reason": "found a box"}

    views = await asyncio.gather(*(
        service.start(session_id=session_id, owner="alice", tool="adjust_stock", raw_arguments=arguments,
                      call_id="w-1", assertion="as-1") for _ in range(4)))

    assert {v.status for v in views} == {"running"} and len({v.operation_id for v in views}) == 1
    # Deliveries that overlap may each send the prepare, always of the one operation (the ERP's inbox answers).
    assert {(p.operation_id, p.assertion) for p in downstream.prepares} == {(views[0].operation_id, "as-1")}
    assert await event_types(engine, session_id) == ["tool_started"] and await calls_in(engine, session_id) == 1


async def test_the_migration_derives_the_same_keys_for_existing_calls(engine):
    """0003_idem backfills ``call_key`` in SQL; it must match the agent's own derivation."""
    path = Path(MIGRATIONS, "versions", "0003_idem_call_ids_per_session.py")
    spec = importlib.util.spec_from_file_location("migration_0003_idem", path)
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    pairs = [("ses_abc", "call_1"), ("a:b", "c"), ("a", "b:c"), ("ses_ü", "run_x:call_0")]
    async with engine.connect() as conn:
        for session_id, call_id in pairs:
            derived = await conn.scalar(text(
                f"SELECT {migration._CALL_KEY} FROM (SELECT CAST(:s AS text) AS session_id, "
                "CAST(:c AS text) AS call_id) AS t"), {"s": session_id, "c": call_id})
            assert derived == call_key(session_id, call_id)
