"""A whole approval cycle through the PostgreSQL unit of work: the events a transition writes in the same
statement as the call (numbered from the ``last_seq`` read under the locked read) are gap-free, in order,
each with its outbox row; the grant and the durable intent are one transaction; reads open none."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from sqlalchemy import select

from erpilot_agent.adapters import repository
from erpilot_agent.adapters.call_store import SqlCallUnitOfWork
from erpilot_agent.adapters.tables import outbox, session_events, sessions, tool_calls
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_contracts.approval.v1 import ApprovalRecordV1, GrantV1, ToolPolicyV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import OperationStatusV1, ToolResultV1
from erpilot_platform.db import create_engine

pytestmark = pytest.mark.integration
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Downstream:
    """Drafts succeed, writes need approval and commit; remembers the approval request."""

    def __init__(self) -> None:
        self.requested: list = []

    async def policy(self, tool: str) -> ToolPolicyV1:
        action = "require_approval" if tool == "submit_order" else "allow"
        return ToolPolicyV1(tool=tool, action=action, roles=["manager"], ttl_seconds=900)

    def policy_version_seen(self, version: str) -> None:
        pass

    async def draft(self, cmd) -> ToolResultV1:
        return ToolResultV1(outcome="succeeded", result={"draft_id": "DR-1", "revision": 1})

    async def prepare(self, cmd) -> ReplyV1:
        return ReplyV1.success({"operation_id": cmd.operation_id, "preview": {"operation": cmd.tool}})

    async def request_approval(self, cmd) -> ApprovalRecordV1:
        record = ApprovalRecordV1(
            pending_id=f"pa_{uuid.uuid4().hex[:8]}", call_id=cmd.call_id, session_id=cmd.session_id, tool=cmd.tool,
            arguments=cmd.arguments, fingerprint=cmd.fingerprint, operation_id=cmd.operation_id, risk="low",
            preview={"operation": cmd.tool}, required_roles=["manager"], requested_by="alice", created_at=NOW,
            expires_at=NOW + timedelta(minutes=15), status="pending", policy_version="test")
        self.requested.append(record)
        return record

    async def commit(self, operation_id: str, grant: GrantV1) -> OperationStatusV1:
        return OperationStatusV1(operation_id=operation_id, tool="submit_order", status="committed",
                                 result={"order_id": "SO-1"})


@pytest.fixture
async def engine(database_url):
    engine = create_engine(database_url, pool_size=4)
    yield engine
    await engine.dispose()


async def test_an_approval_cycle_numbers_its_events_gap_free_each_with_its_outbox_row(engine):
    downstream = Downstream()
    service = ToolCallService(partial(SqlCallUnitOfWork, engine), downstream, public_url="http://test")
    session_id = f"ses_{uuid.uuid4().hex[:20]}"
    async with engine.begin() as conn:
        await repository.create_session(conn, session_id, "alice", None)

    await service.start(session_id=session_id, owner="alice", tool="create_order_draft", call_id="c1",
                        raw_arguments={"customer_id": "CUST-ACME", "lines": [{"sku": "SKU-PAPER-A4", "qty": 1}]})
    view = await service.start(session_id=session_id, owner="alice", tool="submit_order", call_id="c2",
                               raw_arguments={"draft_id": "DR-1", "revision": 1})
    [approval] = downstream.requested
    await service.on_approval_requested(approval)  # the approval service's event after the reply: no change
    grant = GrantV1(pending_id=view["pending_id"], operation_id=view["operation_id"], fingerprint="fp",
                    decided_by="mgr", decided_at=NOW, signature="sig")
    # Two deliveries of the decision at once: the call's lock serialises them, the second changes nothing.
    await asyncio.gather(*(service.on_approval_resolved(
        session_id=session_id, call_id="c2", pending_id=view["pending_id"], status="approved", decided_by="mgr",
        comment=None, grant=grant) for _ in range(2)))

    async with engine.connect() as conn:
        events = (await conn.execute(select(session_events.c.seq, session_events.c.type)
                                     .where(session_events.c.session_id == session_id)
                                     .order_by(session_events.c.seq))).all()
        queued = (await conn.execute(select(outbox.c.msg_id, outbox.c.payload)
                                     .where(outbox.c.msg_id.like(f"session:{session_id}:%"))
                                     .order_by(outbox.c.id))).all()
        last_seq = await conn.scalar(select(sessions.c.last_seq).where(sessions.c.session_id == session_id))
        call = (await conn.execute(select(tool_calls).where(
            tool_calls.c.call_key == call_key(session_id, "c2")))).one()

    types = ["tool_started", "tool_finished", "tool_started", "approval_pending", "approval_resolved",
             "tool_executing", "tool_finished"]
    assert [type_ for _, type_ in events] == types
    assert [seq for seq, _ in events] == list(range(1, len(types) + 1)) and last_seq == len(types)
    assert [row.msg_id for row in queued] == [f"session:{session_id}:{seq}" for seq in range(1, len(types) + 1)]
    assert [(row.payload["seq"], row.payload["type"]) for row in queued] == events
    assert call.status == "finished" and call.grant["pending_id"] == view["pending_id"]
    assert call.commit_sent_at is not None  # recorded with the grant, before the commit went out


async def test_a_read_only_unit_of_work_refuses_to_write(engine):
    async with SqlCallUnitOfWork(engine, read_only=True) as uow:
        assert await uow.calls.get("tc_none") is None
        with pytest.raises(RuntimeError):
            await uow.calls.get("tc_none", lock=True)
        with pytest.raises(RuntimeError):
            await uow.commit()
