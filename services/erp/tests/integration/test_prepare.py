"""cmd.erp.prepare: the requester's assertion, fingerprint check, stored operation and preview, the approval
request the ledger sends from its own record (outbox, command stream), idempotency by operation_id, edits."""

from __future__ import annotations

import json

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.erp.v1 import PreparedOperationV1, PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.subjects import DEAD_LETTER_STREAM, dead_letter_subject
from erpilot_contracts.tools.v1 import normalise
from erpilot_platform.grants import sign_edit
from erpilot_platform.ledger_signatures import verify_request

from .conftest import LEDGER_KEY, SIGNING_KEY

pytestmark = pytest.mark.integration


async def test_prepare_stores_the_operation_and_answers_its_preview(erp, session_id):
    sku = await erp.make_product(on_hand=8, price_minor=500)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 2)])
    cmd = erp.prepare_cmd("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)

    reply = await erp.send(subjects.ERP_CMD_PREPARE, cmd)

    assert reply.ok, reply
    answer = PreparedOperationV1.model_validate(reply.data)
    assert (answer.operation_id, answer.tool, answer.fingerprint) == (cmd.operation_id, "submit_order",
                                                                     cmd.fingerprint)
    assert answer.preview.operation == "Submit order" and answer.preview.amount_minor == 1000
    row = await erp.operation_row(cmd.operation_id)
    assert (row.status, row.fingerprint, row.arguments, row.call_id, row.tool_schema_version) == (
        "prepared", cmd.fingerprint, cmd.arguments, cmd.call_id, 1)
    assert (row.requested_by, row.assertion, row.supersedes) == ("tester", cmd.assertion, None)
    # the assertion was checked at the time JetStream stored the command, a little before the prepare (#32)
    assert row.prepared_at is not None and row.asserted_at <= row.prepared_at
    assert row.facts["stock_before"] == {sku: 8}
    assert row.preview["effects"] == [{"label": f"stock {sku}", "before": 8, "after": 6, "unit": "pcs"}]
    status = (await erp.operation(cmd.operation_id)).data
    assert status["status"] == "prepared" and status["session_id"] == session_id and status["requested_by"] == "tester"

    [request] = await erp.approval_requests(cmd.operation_id)  # relayed from the outbox, once
    asked = RequestApprovalV1.model_validate(request)
    assert (asked.operation_id, asked.call_id, asked.session_id, asked.tool, asked.fingerprint, asked.arguments) == (
        cmd.operation_id, cmd.call_id, session_id, "submit_order", cmd.fingerprint, cmd.arguments)
    assert (asked.requested_by, asked.assertion) == ("tester", cmd.assertion)
    assert (asked.asserted_at, asked.prepared_at) == (row.asserted_at, row.prepared_at)
    assert request["preview"] == row.preview  # as a person will see it: no schema_version anywhere
    assert "schema_version" not in json.dumps(request["preview"])
    # Signed with the ledger key, and still verifying after the outbox's JSONB and the stream (as the approval
    # service parses it: from the JSON, its preview typed).
    assert asked.ledger_signature and verify_request(asked, LEDGER_KEY.public_key())
    assert verify_request(RequestApprovalV1.model_validate_json(json.dumps(request)), LEDGER_KEY.public_key())


async def test_the_same_operation_again_gets_the_stored_preview_and_another_fingerprint_conflicts(erp, session_id):
    sku = await erp.make_product(on_hand=8)
    cmd = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": -3, "reason": "breakage"}, session_id=session_id)
    first = await erp.send(subjects.ERP_CMD_PREPARE, cmd)
    await erp.update_product(sku, price_minor=1)  # the preview is stored, not recomputed

    again = await erp.send(subjects.ERP_CMD_PREPARE, cmd)
    other = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": -4, "reason": "breakage"}, session_id=session_id,
                            operation_id=cmd.operation_id)
    conflict = await erp.send(subjects.ERP_CMD_PREPARE, other)

    assert first.ok and again == first
    assert [e.model_dump(exclude={"schema_version"}) for e in PreparedOperationV1.model_validate(
        first.data).preview.effects] == [{"label": f"on hand {sku}", "before": 8, "after": 5, "unit": "pcs"}]
    assert not conflict.ok and conflict.error.code == "operation_conflict" and conflict.error.status == 409
    assert (await erp.operation_row(cmd.operation_id)).fingerprint == cmd.fingerprint
    assert len(await erp.approval_requests(cmd.operation_id)) == 1


async def test_a_fingerprint_that_does_not_match_the_arguments_is_refused(erp, session_id):
    sku = await erp.make_product()
    cmd = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": 1, "reason": "x"}, session_id=session_id)
    forged = cmd.model_copy(update={"arguments": {**cmd.arguments, "delta": 1000}})

    reply = await erp.send(subjects.ERP_CMD_PREPARE, forged)

    assert not reply.ok and reply.error.code == "fingerprint_mismatch" and reply.error.status == 422
    assert await erp.operation_row(cmd.operation_id) is None


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    ("adjust_stock", {"sku": "SKU-PEN-BLUE", "delta": 1.0, "reason": "x"}, "invalid_arguments"),
    ("adjust_stock", {"sku": "SKU-PEN-BLUE", "delta": 1, "reason": "x", "extra": 1}, "invalid_arguments"),
    ("create_order_draft", {"customer_id": "C-1001", "lines": [{"sku": "SKU-PEN-BLUE", "qty": 1}]},
     "not_a_write_tool"),
    ("drop_tables", {}, "not_a_write_tool"),
])
async def test_bad_prepare_requests_are_refused_with_422(erp, session_id, tool, arguments, code):
    cmd = PrepareOperationV1(operation_id="op-bad-" + session_id, session_id=session_id, call_id="c", tool=tool,
                             arguments=arguments, fingerprint="sha256:x", requested_by="tester")

    reply = await erp.send(subjects.ERP_CMD_PREPARE, cmd)

    assert not reply.ok and reply.error.code == code and reply.error.status == 422
    assert await erp.operation_row(cmd.operation_id) is None


@pytest.mark.parametrize(("make", "code", "status"), [
    ("insufficient", "insufficient_stock", 409),
    ("missing", "not_found", 404),
])
async def test_a_prepare_rejection_is_stored_and_repeated(erp, session_id, make, code, status):
    sku = await erp.make_product(on_hand=2) if make == "insufficient" else "SKU-NOT-THERE-" + session_id
    cmd = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": -5, "reason": "x"}, session_id=session_id)
    first = await erp.send(subjects.ERP_CMD_PREPARE, cmd)
    if make == "insufficient":  # the cause goes away: 12 on hand now
        restock = await erp.prepare("adjust_stock", {"sku": sku, "delta": 10, "reason": "x"}, session_id=session_id)
        assert (await erp.approve_and_commit(restock)).data["status"] == "committed"

    again = await erp.send(subjects.ERP_CMD_PREPARE, cmd)

    assert not first.ok and first.error.code == code and first.error.status == status
    assert again == first
    assert await erp.operation_row(cmd.operation_id) is None


@pytest.mark.parametrize(("change", "reason"), [
    ({"assertion": None}, "assertion_missing"),
    ({"requested_by": "victim"}, "assertion_subject_mismatch"),
    ({"assertion": "eyJhbGciOiJFZERTQSJ9.e30.c2ln"}, "assertion_invalid"),
])
async def test_a_prepare_that_names_a_requester_without_the_gateways_word_stores_nothing(
        erp, session_id, change, reason):
    """The forged-requester sequence of issue 25: a prepare in someone's session naming another person."""
    sku = await erp.make_product()
    cmd = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": 1, "reason": "x"}, session_id=session_id)

    reply = await erp.send(subjects.ERP_CMD_PREPARE, cmd.model_copy(update=change))

    assert not reply.ok and (reply.error.code, reply.error.details) == ("invalid_message", {"reason": reason})
    assert await erp.operation_row(cmd.operation_id) is None
    assert await erp.approval_requests(cmd.operation_id) == []
    js = erp.broker.config.connection_state.stream
    last = await js.get_last_msg(DEAD_LETTER_STREAM.name, dead_letter_subject("erp", subjects.ERP_CMD_PREPARE))
    assert json.loads(last.data)["operation_id"] == cmd.operation_id
    assert (await erp.send(subjects.ERP_CMD_PREPARE, cmd)).ok  # the genuine one still goes through


async def test_an_edit_is_prepared_for_the_requester_of_the_version_it_supersedes(erp, session_id):
    sku = await erp.make_product(on_hand=10)
    first = await erp.prepare("adjust_stock", {"sku": sku, "delta": 1, "reason": "x"}, session_id=session_id)
    args = normalise("adjust_stock", {"sku": sku, "delta": 2, "reason": "x"})
    edit = first.model_copy(update={
        "operation_id": first.operation_id + "-e1", "arguments": args,
        "fingerprint": fingerprint("adjust_stock", 1, args), "supersedes": first.operation_id,
        "edited_by": "approver-1", "assertion": None, "requested_by": "someone"})
    edit = sign_edit(edit, SIGNING_KEY)  # the approval service's (its grant key)

    reply = await erp.send(subjects.ERP_CMD_PREPARE, edit)
    stray = await erp.send(subjects.ERP_CMD_PREPARE, sign_edit(edit.model_copy(update={
        "operation_id": first.operation_id + "-e2", "call_id": "another-call"}), SIGNING_KEY))
    unsigned = await erp.send(subjects.ERP_CMD_PREPARE, edit.model_copy(update={
        "operation_id": first.operation_id + "-e3", "edit_signature": None}))  # what the agent could send

    assert reply.ok, reply
    [original] = await erp.approval_requests(first.operation_id)
    [edited] = await erp.approval_requests(edit.operation_id)
    assert edited["supersedes"] == first.operation_id and edited["fingerprint"] == edit.fingerprint
    assert (edited["requested_by"], edited["assertion"], edited["asserted_at"]) == (
        "tester", original["assertion"], original["asserted_at"])
    assert verify_request(RequestApprovalV1.model_validate(edited), LEDGER_KEY.public_key())  # signed alike
    assert (stray.error.code, stray.error.details) == ("invalid_message", {"reason": "supersedes_unknown"})
    assert await erp.operation_row(first.operation_id + "-e2") is None
    assert (unsigned.error.code, unsigned.error.details) == ("invalid_message", {"reason": "edit_signature_missing"})
    assert await erp.operation_row(first.operation_id + "-e3") is None
