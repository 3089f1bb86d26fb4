"""``cmd.approval.request`` (``requests.request_approval``) on the in-memory store: a new approval is stored
with its event and audit row under the database clock, a repeat answers the stored record, and anything
the ledger did not prepare is refused with nothing stored."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_approval.service_layer.requests import request_approval
from erpilot_contracts import subjects

from .conftest import NOW

pytestmark = pytest.mark.unit


async def test_a_new_request_stores_a_pending_approval_with_its_event_and_audit_row(desk):
    cmd = desk.request_cmd("submit_order")
    reply = await request_approval(cmd, desk.ports)

    assert reply.ok and reply.data["status"] == "pending"
    pending_id = reply.data["pending_id"]
    stored = desk.approval(pending_id)
    assert (stored.operation_id, stored.required_roles) == (cmd.operation_id, ["approver", "manager"])
    assert stored.created_at == NOW and stored.expires_at == NOW + timedelta(minutes=15)  # the store's clock
    assert [event["record"]["pending_id"] for event in desk.events(subjects.APPROVAL_EVT_REQUESTED)] == [pending_id]
    assert [(row.kind, row.actor) for row in desk.state.audit] == [("request", "alice")]
    assert (desk.store.wakes, desk.deadlines) == (1, 1)  # the relay and the sweeper were told


async def test_a_repeated_request_answers_the_stored_record_and_stores_nothing_more(desk):
    cmd = desk.request_cmd()
    first = await request_approval(cmd, desk.ports)
    desk.store.advance(seconds=30)

    again = await request_approval(cmd, desk.ports)
    assert again == first
    assert len(desk.state.approvals) == 1 and len(desk.events(subjects.APPROVAL_EVT_REQUESTED)) == 1
    assert (desk.store.wakes, desk.deadlines) == (1, 1)


async def test_a_repeat_under_the_same_operation_id_with_another_fingerprint_is_a_conflict(desk):
    cmd = desk.request_cmd("adjust_stock")
    first = await request_approval(cmd, desk.ports)
    other = desk.request_cmd("adjust_stock", operation_id=cmd.operation_id,
                             arguments={"sku": "SKU-1", "delta": -4, "reason": "count"})

    reply = await request_approval(other, desk.ports)
    assert not reply.ok and (reply.error.code, reply.error.status) == ("idempotency_conflict", 409)
    assert list(desk.state.approvals) == [first.data["pending_id"]]
    assert desk.approval(first.data["pending_id"]).fingerprint == cmd.fingerprint


async def test_a_request_the_ledger_never_prepared_is_refused_and_nothing_is_stored(desk):
    cmd = desk.request_cmd()
    del desk.erp.operations[cmd.operation_id]

    reply = await request_approval(cmd, desk.ports)
    assert not reply.ok and (reply.error.code, reply.error.status) == ("invalid_request", 422)
    assert desk.state.approvals == {} and desk.state.outbox == [] and desk.store.commits == 0


async def test_a_preview_that_differs_from_the_ledgers_is_refused(desk):
    cmd = desk.request_cmd()
    forged = cmd.model_copy(update={"preview": {**cmd.preview, "amount_minor": 1}})

    reply = await request_approval(forged, desk.ports)
    assert not reply.ok and reply.error.code == "invalid_request" and "preview" in reply.error.message
    assert desk.state.approvals == {}


async def test_an_operation_the_ledger_already_committed_gets_no_new_approval(desk):
    cmd = desk.request_cmd()
    desk.erp.operations[cmd.operation_id] = desk.erp.operations[cmd.operation_id].model_copy(
        update={"status": "committed"})

    reply = await request_approval(cmd, desk.ports)
    assert not reply.ok and (reply.error.code, reply.error.status) == ("invalid_request", 422)
    assert desk.state.approvals == {}


async def test_arguments_that_are_not_normalised_are_refused_before_the_ledger_is_asked(desk):
    cmd = desk.request_cmd("adjust_stock", arguments={"sku": "SKU-1", "delta": -3, "reason": "count", "x": 1})

    reply = await request_approval(cmd, desk.ports)
    assert not reply.ok and (reply.error.code, reply.error.status) == ("invalid_arguments", 422)
    assert desk.store.commits == 0
