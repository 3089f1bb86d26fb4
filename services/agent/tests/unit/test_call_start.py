"""Starting a tool call (``ToolCallService.start``) on the in-memory unit of work and a fake ERP and
approval service: what is recorded, what the session stream shows, what the caller is answered."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest
import rfc8785

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.service_layer.tool_calls import CallRejected
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ToolResultV1
from erpilot_platform.broker import ReplyError
from erpilot_platform.idempotency import request_digest

pytestmark = pytest.mark.unit
PEN = {"sku": "SKU-PEN-BLUE"}
DRAFT = {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A4", "qty": 2}]}
STOCK = {"sku": "SKU-PEN-BLUE", "delta": -3, "reason": "damaged in transit"}


async def test_a_read_runs_once_and_its_result_is_the_answer(service, store, downstream, finished):
    downstream.run_answer = ToolResultV1(outcome="succeeded", result={"sku": "SKU-PEN-BLUE", "on_hand": 85})

    view = await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN,
                               call_id="c-1", source="model", run_id="run_1")

    assert (view["status"], view["outcome"], view["result"]) == ("finished", "succeeded",
                                                                 {"sku": "SKU-PEN-BLUE", "on_hand": 85})
    assert [(cmd.tool, cmd.arguments, cmd.requested_by) for cmd in downstream.runs] == [
        ("get_product", PEN, "alice")]
    assert store.event_types("ses_1") == ["tool_started", "tool_finished"]
    assert (store.units, store.commits) == (2, 1)  # looked up, then recorded once, finished, with both events
    assert len(finished) == 1  # the run driver hears of it


async def test_the_run_driver_hears_only_of_a_models_calls(service, finished):
    await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN, call_id="c-1")

    assert finished == []  # an external agent's call: no run waits for it


async def test_the_same_call_again_is_answered_from_the_record_without_running_it_again(service, store, downstream):
    first = await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN,
                                call_id="c-1")
    again = await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN,
                                call_id="c-1")

    assert again == first
    assert len(downstream.runs) == 1
    assert store.event_types("ses_1") == ["tool_started", "tool_finished"]


async def test_a_read_a_concurrent_delivery_recorded_first_is_answered_with_that_record(service, store, downstream):
    answers = iter([{"on_hand": 1}, {"on_hand": 2}])
    plain_read = downstream.read

    async def read_overtaken(cmd):
        result = await plain_read(cmd)
        result = result.model_copy(update={"result": next(answers)})
        if len(downstream.runs) == 1:  # the other delivery reads and records while this one waits for the ERP
            await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN,
                                call_id="c-1")
        return result

    downstream.read = read_overtaken
    view = await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN, call_id="c-1")

    assert view["result"] == {"on_hand": 2}  # the recorded answer, the first to commit
    assert store.event_types("ses_1") == ["tool_started", "tool_finished"]


async def test_the_same_call_id_with_other_arguments_is_a_conflict(service, downstream):
    await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN, call_id="c-1")

    with pytest.raises(CallRejected) as rejected:
        await service.start(session_id="ses_1", owner="alice", tool="get_product",
                            raw_arguments={"sku": "SKU-PAPER-A4"}, call_id="c-1")

    assert (rejected.value.reply.error.code, rejected.value.reply.error.status) == ("idempotency_conflict", 409)
    assert len(downstream.runs) == 1


async def test_the_call_row_stores_the_versioned_request_digest(service, store):
    await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN, call_id="c-1")

    assert store.rows[call_key("ses_1", "c-1")].request_hash == request_digest(
        {"tool": "get_product", "arguments": PEN})


async def test_a_call_recorded_before_the_upgrade_is_still_its_repeat(service, store, downstream):
    first = await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN,
                                call_id="c-1")
    row = store.rows[call_key("ses_1", "c-1")]
    pre_upgrade = "sha256:" + hashlib.sha256(rfc8785.dumps({"tool": "get_product", "arguments": PEN})).hexdigest()
    store.rows[row.call_key] = replace(row, request_hash=pre_upgrade)

    again = await service.start(session_id="ses_1", owner="alice", tool="get_product",
                                raw_arguments={"sku": "SKU-PEN-BLUE"}, call_id="c-1")
    with pytest.raises(CallRejected) as rejected:
        await service.start(session_id="ses_1", owner="alice", tool="get_product",
                            raw_arguments={"sku": "SKU-PAPER-A4"}, call_id="c-1")

    assert again == first and len(downstream.runs) == 1
    assert (rejected.value.reply.error.code, rejected.value.reply.error.status) == ("idempotency_conflict", 409)


@pytest.mark.parametrize("session_id, owner", [("ses_unknown", "alice"), ("ses_1", "mallory")])
async def test_a_call_in_a_session_that_is_not_the_callers_is_not_found(service, store, session_id, owner):
    with pytest.raises(CallRejected) as rejected:
        await service.start(session_id=session_id, owner=owner, tool="get_product", raw_arguments=PEN,
                            call_id="c-1")

    assert (rejected.value.reply.error.code, rejected.value.reply.error.status) == ("not_found", 404)
    assert store.rows == {} and store.events == []


@pytest.mark.parametrize("tool, arguments, code, status", [
    ("launch_rocket", {}, "unknown_tool", 422),
    ("get_product", {"sku": "SKU-PEN-BLUE", "colour": "red"}, "invalid_arguments", 422),
    ("adjust_stock", {"sku": "SKU-PEN-BLUE", "delta": 0, "reason": "x"}, "invalid_arguments", 422),
])
async def test_a_call_the_catalog_refuses_records_nothing(service, store, downstream, tool, arguments, code, status):
    with pytest.raises(CallRejected) as rejected:
        await service.start(session_id="ses_1", owner="alice", tool=tool, raw_arguments=arguments, call_id="c-1")

    assert (rejected.value.reply.error.code, rejected.value.reply.error.status) == (code, status)
    assert store.rows == {} and store.events == [] and downstream.runs == []


async def test_a_tool_the_policy_denies_records_nothing(service, store, downstream):
    downstream.actions["get_product"] = "deny"

    with pytest.raises(CallRejected) as rejected:
        await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN, call_id="c-1")

    assert (rejected.value.reply.error.code, rejected.value.reply.error.status) == ("policy_denied", 403)
    assert store.rows == {} and downstream.runs == []


async def test_a_draft_the_erp_rejects_finishes_business_rejected(service, downstream):
    downstream.run_answer = ToolResultV1(outcome="business_rejected",
                                         error={"code": "unknown_customer", "message": "no customer C-1001"})

    view = await service.start(session_id="ses_1", owner="alice", tool="create_order_draft", raw_arguments=DRAFT,
                               call_id="c-1")

    assert (view["outcome"], view["error"]) == ("business_rejected",
                                                {"code": "unknown_customer", "message": "no customer C-1001"})


async def test_an_erp_refusal_that_is_no_business_outcome_fails_the_call(service, make, downstream):
    downstream.run_answer = make.reply_error("invalid_arguments", "line qty too large", 422)

    view = await service.start(session_id="ses_1", owner="alice", tool="create_order_draft", raw_arguments=DRAFT,
                               call_id="c-1")

    assert (view["outcome"], view["error"]) == ("failed", {"code": "invalid_arguments",
                                                           "message": "line qty too large"})


async def test_an_erp_failure_of_its_own_is_raised_and_a_retry_reads_again(service, store, make, downstream):
    downstream.run_answer = make.reply_error("internal_error", "database away", 503)

    with pytest.raises(ReplyError):
        await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN, call_id="c-1")
    assert store.rows == {} and store.events == []  # a read is recorded only with its answer
    downstream.run_answer = ToolResultV1(outcome="succeeded", result={"sku": "SKU-PEN-BLUE"})
    view = await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments=PEN,
                               call_id="c-1")

    assert view["outcome"] == "succeeded"
    assert len(downstream.runs) == 2
    assert store.event_types("ses_1") == ["tool_started", "tool_finished"]


async def test_a_write_is_prepared_and_waits_for_a_person(service, store, downstream, finished):
    view = await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK,
                               call_id="c-1")

    assert (view["status"], view["pending_id"], view["approval_status"]) == ("awaiting_approval", "pa_1", "pending")
    assert view["approval_url"] == "https://erpilot.test/resume/pa_1"
    [prepared] = downstream.prepares
    [requested] = downstream.requests
    assert (prepared.operation_id, prepared.requested_by, prepared.arguments) == (view["operation_id"], "alice", STOCK)
    assert (requested.operation_id, requested.fingerprint, requested.preview) == (
        view["operation_id"], prepared.fingerprint, {"operation": "adjust_stock"})
    assert store.event_types("ses_1") == ["tool_started", "approval_pending"]
    assert downstream.runs == [] and downstream.commits == [] and finished == []
    assert store.units == 3  # look the call up, record it, record the approval: no re-reads between


async def test_a_write_the_policy_lets_through_without_approval_runs_like_a_draft(service, downstream):
    downstream.actions["adjust_stock"] = "allow"

    view = await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK,
                               call_id="c-1")

    assert view["outcome"] == "succeeded"
    assert downstream.prepares == [] and len(downstream.runs) == 1


@pytest.mark.parametrize("status, outcome", [(409, "business_rejected"), (503, "failed")])
async def test_a_write_the_erp_will_not_prepare_ends_without_an_approval(service, store, downstream, status, outcome):
    downstream.prepare_reply = ReplyV1.failure("insufficient_stock", "only 2 on hand", status)

    view = await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK,
                               call_id="c-1")

    assert (view["outcome"], view["error"]) == (outcome, {"code": "insufficient_stock", "message": "only 2 on hand"})
    assert downstream.requests == []
    assert store.event_types("ses_1") == ["tool_started", "tool_finished"]
