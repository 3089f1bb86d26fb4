"""The identity of a tool call on a real PostgreSQL: a ``call_id`` is unique per session, a repeated or
duplicated command finds the same call (one row, one operation, one set of events), another request
under the same id is a conflict, and nothing about another session's calls is ever revealed.

The ERP and the approval service are replaced by a recording fake of the agent's ``Downstream`` port.
"""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from erpilot_agent.adapters import repository
from erpilot_agent.adapters.call_store import SqlCallUnitOfWork
from erpilot_agent.adapters.downstream import Downstream
from erpilot_agent.adapters.tables import session_events, tool_calls
from erpilot_agent.app import MIGRATIONS
from erpilot_agent.domain.call_identity import call_key, operation_id_for
from erpilot_agent.service_layer import sessions
from erpilot_agent.service_layer.tool_calls import CallRejected, ToolCallService
from erpilot_contracts.approval.v1 import ApprovalRecordV1, RequestApprovalV1, ToolPolicyV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, PrepareOperationV1, ToolResultV1
from erpilot_platform.db import create_engine

pytestmark = pytest.mark.integration
DRAFT = {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A4", "qty": 2}]}


class RecordingDownstream(Downstream):
    """Answers like the ERP and the approval service would, and records every command it got."""

    def __init__(self) -> None:
        super().__init__(broker=None)
        self.drafts: list[ExecuteToolV1] = []
        self.prepares: list[PrepareOperationV1] = []
        self.requests: list[RequestApprovalV1] = []

    async def policy(self, tool: str) -> ToolPolicyV1:
        action = "require_approval" if tool == "adjust_stock" else "allow"
        return ToolPolicyV1(tool=tool, action=action, roles=["manager"], ttl_seconds=900)

    async def draft(self, cmd: ExecuteToolV1) -> ToolResultV1:
        self.drafts.append(cmd)
        await asyncio.sleep(0.05)  # let concurrent deliveries overlap
        return ToolResultV1(outcome="succeeded", result={"draft_id": f"D-{cmd.operation_id[-6:]}", "revision": 1})

    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        self.prepares.append(cmd)
        preview = {"operation": "Adjust stock", "object": cmd.arguments["sku"], "target": "stock"}
        return ReplyV1.success({"operation_id": cmd.operation_id, "tool": cmd.tool,
                                "fingerprint": cmd.fingerprint, "preview": preview})

    async def request_approval(self, cmd: RequestApprovalV1) -> ApprovalRecordV1:
        self.requests.append(cmd)
        now = datetime.now(UTC)
        return ApprovalRecordV1(
            pending_id="pa_" + cmd.operation_id[3:], call_id=cmd.call_id, session_id=cmd.session_id, tool=cmd.tool,
            arguments=cmd.arguments, fingerprint=cmd.fingerprint, operation_id=cmd.operation_id, risk="low",
            preview=cmd.preview, required_roles=["manager"], requested_by=cmd.requested_by, created_at=now,
            expires_at=now + timedelta(minutes=15), status="pending", policy_version="test")


@pytest.fixture(scope="module")
async def engine(database_url):
    engine = create_engine(database_url, pool_size=8)
    yield engine
    await engine.dispose()


@pytest.fixture
def downstream() -> RecordingDownstream:
    return RecordingDownstream()


@pytest.fixture
def service(engine, downstream) -> ToolCallService:
    return ToolCallService(partial(SqlCallUnitOfWork, engine), downstream, public_url="http://erpilot.test")


async def new_session(engine, owner: str) -> str:
    session_id = f"ses_{uuid.uuid4().hex[:20]}"
    async with engine.begin() as conn:
        await repository.create_session(conn, session_id, owner, None)
    return session_id


async def event_types(engine, session_id: str) -> list[str]:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(session_events.c.type).where(session_events.c.session_id == session_id)
                                   .order_by(session_events.c.seq))).scalars()
        return list(rows)


async def calls_in(engine, session_id: str) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(tool_calls)
                                 .where(tool_calls.c.session_id == session_id))


async def test_the_same_call_id_in_two_sessions_is_two_calls_and_neither_sees_the_other(engine, service, downstream):
    alice, bob = await new_session(engine, "alice"), await new_session(engine, "bob")

    first = await service.start(session_id=alice, owner="alice", tool="create_order_draft",
                                raw_arguments=DRAFT, call_id="c-1")
    other_args = {"customer_id": "C-1002", "lines": [{"sku": "SKU-PEN-BLUE", "qty": 5}]}
    second = await service.start(session_id=bob, owner="bob", tool="create_order_draft",
                                 raw_arguments=other_args, call_id="c-1")

    assert first["call_id"] == second["call_id"] == "c-1"
    assert (first["session_id"], second["session_id"]) == (alice, bob)
    assert first["outcome"] == second["outcome"] == "succeeded"
    assert first["arguments"]["customer_id"] == "C-1001" and second["arguments"]["customer_id"] == "C-1002"
    assert first["operation_id"] != second["operation_id"]
    assert [d.operation_id for d in downstream.drafts] == [first["operation_id"], second["operation_id"]]
    # Each session reads only its own call under that id; an id used only elsewhere is simply unknown.
    units = partial(SqlCallUnitOfWork, engine)
    mine = await sessions.tool_call_view(units, alice, "alice", "c-1")
    assert mine.data["arguments"] == first["arguments"]
    await service.start(session_id=bob, owner="bob", tool="create_order_draft", raw_arguments=DRAFT,
                        call_id="only-bob")
    unknown = await sessions.tool_call_view(units, alice, "alice", "only-bob")
    assert not unknown.ok and unknown.error.code == "not_found"
    assert not (await sessions.tool_call_view(units, bob, "alice", "c-1")).ok  # not alice's session


async def test_an_id_another_session_used_with_another_body_is_no_conflict_here(engine, service, downstream):
    """The answer must not depend on (so cannot reveal) what another session did with the id."""
    alice, bob = await new_session(engine, "alice"), await new_session(engine, "bob")
    await service.start(session_id=bob, owner="bob", tool="create_order_draft", raw_arguments=DRAFT,
                        call_id="shared-id")

    other = {"customer_id": "C-1003", "lines": [{"sku": "SKU-PAPER-A3", "qty": 1}]}

    view = await service.start(session_id=alice, owner="alice", tool="create_order_draft", raw_arguments=other,
                               call_id="shared-id")

    assert view["outcome"] == "succeeded" and view["session_id"] == alice
    assert await calls_in(engine, alice) == 1 and await calls_in(engine, bob) == 1
    with pytest.raises(CallRejected) as refused:  # bob's own session does refuse another body under the id
        await service.start(session_id=bob, owner="bob", tool="create_order_draft", raw_arguments=other,
                            call_id="shared-id")
    assert refused.value.reply.error.code == "idempotency_conflict" and refused.value.reply.error.status == 409
    assert alice not in refused.value.reply.error.message and "alice" not in refused.value.reply.error.message


async def test_repeating_a_call_answers_that_call_and_another_body_is_a_conflict(engine, service, downstream):
    session_id = await new_session(engine, "alice")
    start = dict(session_id=session_id, owner="alice", tool="create_order_draft", call_id="idem-1")

    first = await service.start(raw_arguments=DRAFT, **start)
    again = await service.start(raw_arguments=DRAFT, **start)
    with pytest.raises(CallRejected) as conflict:
        await service.start(raw_arguments={**DRAFT, "note": "other"}, **start)
    with pytest.raises(CallRejected) as stranger:
        await service.start(**{**start, "owner": "mallory"}, raw_arguments=DRAFT)

    assert again == first
    assert conflict.value.reply.error.code == "idempotency_conflict"
    assert stranger.value.reply.error.code == "not_found"
    assert len(downstream.drafts) == 1
    assert first["operation_id"] == operation_id_for(call_key(session_id, "idem-1"))  # fixed by the identity
    assert await event_types(engine, session_id) == ["tool_started", "tool_finished"]


async def test_concurrent_deliveries_of_one_command_make_one_call_and_one_operation(engine, service, downstream):
    session_id = await new_session(engine, "alice")

    views = await asyncio.gather(*(
        service.start(session_id=session_id, owner="alice", tool="create_order_draft", raw_arguments=DRAFT,
                      call_id="dup-1") for _ in range(6)))

    assert await calls_in(engine, session_id) == 1
    assert {v["outcome"] for v in views} == {"succeeded"} and len({v["operation_id"] for v in views}) == 1
    assert {v["result"]["draft_id"] for v in views} == {views[0]["result"]["draft_id"]}
    # Deliveries that overlap may each ask the ERP, always for the one operation (idempotent there).
    assert {d.operation_id for d in downstream.drafts} == {views[0]["operation_id"]}
    assert await event_types(engine, session_id) == ["tool_started", "tool_finished"]


async def test_a_duplicated_write_prepares_and_requests_one_operation(engine, service, downstream):
    session_id = await new_session(engine, "alice")
    arguments = {"sku": "SKU-PAPER-A4", "delta": 3, "reason": "found a box"}

    views = await asyncio.gather(*(
        service.start(session_id=session_id, owner="alice", tool="adjust_stock", raw_arguments=arguments,
                      call_id="w-1") for _ in range(4)))

    assert {v["status"] for v in views} == {"awaiting_approval"}
    assert len({(v["operation_id"], v["pending_id"]) for v in views}) == 1
    assert {p.operation_id for p in downstream.prepares} == {r.operation_id for r in downstream.requests} \
        == {views[0]["operation_id"]}
    assert await event_types(engine, session_id) == ["tool_started", "approval_pending"]


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
