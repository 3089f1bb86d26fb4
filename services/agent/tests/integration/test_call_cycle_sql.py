"""A whole write through the PostgreSQL unit of work, the way the events arrive: recorded and prepared, then
the approval service's and the ERP's events, some of them twice at once. The events a transition writes in the
same statement as the call are gap-free, in order, each with its outbox row; concurrent deliveries of one event
record it once (the call's row lock); the assertion is stored with the call and forwarded unchanged."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from erpilot_agent.adapters.tables import outbox, sessions, tool_calls
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_contracts.approval.v1 import ApprovalRecordV1, ApprovalResolvedV1, ToolPolicyV1
from erpilot_contracts.erp.v1 import OperationStatusV1, PreparedOperationV1, PreviewV1, ToolResultV1
from erpilot_platform.broker import TransientError
from erpilot_platform.outbox import name_of
from erpilot_platform.testing.previews import preview as a_preview

from .conftest import event_types, new_session

pytestmark = pytest.mark.integration
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Downstream:
    """Drafts succeed, writes need approval and are prepared; remembers what was sent."""

    def __init__(self) -> None:
        self.prepared: list = []
        self.drafts: list = []

    async def policy(self, tool: str) -> ToolPolicyV1:
        action = "require_approval" if tool == "submit_order" else "allow"
        return ToolPolicyV1(tool=tool, action=action, roles=["manager"], ttl_seconds=900)

    def policy_version_seen(self, version: str) -> None:
        pass

    async def draft(self, cmd) -> ToolResultV1:
        self.drafts.append(cmd)
        return ToolResultV1(outcome="succeeded", result={"draft_id": "DR-1", "revision": 1})

    async def prepare(self, cmd) -> PreparedOperationV1:
        self.prepared.append(cmd)
        return PreparedOperationV1(operation_id=cmd.operation_id, tool=cmd.tool, fingerprint=cmd.fingerprint,
                                   preview=PreviewV1(operation="Submit order", object="DR-1", target="Acme"))


def requested(cmd) -> ApprovalRecordV1:
    """The approval the ERP's outbox asked for, as the approval service's event carries it."""
    return ApprovalRecordV1(
        pending_id="pa_1", call_id=cmd.call_id, session_id=cmd.session_id, tool=cmd.tool, arguments=cmd.arguments,
        fingerprint=cmd.fingerprint, operation_id=cmd.operation_id, risk="low",
        preview=a_preview(cmd.tool, "it", "them"),
        required_roles=["manager"], requested_by="alice", created_at=NOW, expires_at=NOW + timedelta(minutes=15),
        status="pending", policy_version="test")


async def test_a_write_cycle_numbers_its_events_gap_free_each_with_its_outbox_row_once(engine, uow):
    downstream = Downstream()
    service = ToolCallService(uow, downstream, public_url="http://test")
    session_id = await new_session(uow)

    await service.start(session_id=session_id, owner="alice", tool="create_order_draft", call_id="c1",
                        raw_arguments={"customer_id": "CUST-ACME", "lines": [{"sku": "SKU-PAPER-A4", "qty": 1}]},
                        assertion="as-1")
    view = await service.start(session_id=session_id, owner="alice", tool="submit_order", call_id="c2",
                               raw_arguments={"draft_id": "DR-1", "revision": 1}, assertion="as-1")
    [prepare] = downstream.prepared
    assert (view.status, prepare.assertion, downstream.drafts[0].assertion) == ("running", "as-1", "as-1")
    status = OperationStatusV1(operation_id=view.operation_id, tool="submit_order", status="committed",
                               session_id=session_id, call_id="c2", pending_id="pa_1", decided_by="mgr",
                               result={"order_id": "SO-1"})
    with pytest.raises(TransientError):  # the outcome overtook the approval: retried, never recorded first
        await service.on_operation_finished(status)
    approved = ApprovalResolvedV1(pending_id="pa_1", call_id="c2", session_id=session_id,
                                  operation_id=view.operation_id, status="approved", decided_by="mgr")
    # Each event delivered twice at once: the call's lock serialises them, the second changes nothing.
    await asyncio.gather(*(service.on_approval_requested(requested(prepare)) for _ in range(2)))
    await asyncio.gather(*(service.on_approval_resolved(approved) for _ in range(2)))
    await asyncio.gather(*(service.on_operation_finished(status) for _ in range(2)))

    async with engine.connect() as conn:
        queued = (await conn.execute(select(outbox.c.msg_id, outbox.c.payload)
                                     .where(outbox.c.msg_id.like(f"session:{session_id}:%"))
                                     .order_by(outbox.c.id))).all()
        last_seq = await conn.scalar(select(sessions.c.last_seq).where(sessions.c.session_id == session_id))
        call = (await conn.execute(select(tool_calls).where(
            tool_calls.c.call_key == call_key(session_id, "c2")))).one()

    types = ["tool_started", "tool_finished", "tool_started", "approval_pending", "approval_resolved",
             "tool_executing", "tool_finished"]
    assert await event_types(engine, session_id) == types and last_seq == len(types)
    assert [name_of(row.msg_id) for row in queued] == [
        f"session:{session_id}:{seq}" for seq in range(1, len(types) + 1)]
    assert [(row.payload["seq"], row.payload["type"]) for row in queued] == list(enumerate(types, start=1))
    assert (call.status, call.outcome, call.result, call.assertion) == ("finished", "succeeded",
                                                                        {"order_id": "SO-1"}, "as-1")
