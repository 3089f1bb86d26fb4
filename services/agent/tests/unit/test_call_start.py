"""Starting a tool call (``ToolCallService.start``) on the memory unit of work and a fake ERP: what is recorded,
what the session stream shows, what the ERP is sent (with the requester assertion), what the caller is answered."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest
import rfc8785

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.service_layer import tool_calls
from erpilot_contracts.erp.v1 import ToolResultV1
from erpilot_contracts.subjects import session_events_subject
from erpilot_platform.broker import ReplyError, ServiceUnavailable
from erpilot_platform.idempotency import request_digest
from erpilot_platform.refusals import Refused

from ..fakes import reply_error

pytestmark = pytest.mark.unit
PEN = {"sku": "SKU-PEN-BLUE"}
DRAFT = {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A4", "qty": 2}]}
STOCK = {"sku": "SKU-PEN-BLUE", "delta": -3, "reason": "damaged in transit"}
KEY = call_key("ses_1", "c-1")


async def start(service, tool: str, arguments: dict, *, call_id: str = "c-1", assertion: str | None = "as-1",
                **extra):
    return await service.start(session_id="ses_1", owner="alice", tool=tool, raw_arguments=arguments,
                               call_id=call_id, assertion=assertion, **extra)


async def test_a_read_runs_once_and_its_result_is_the_answer(service, uow, downstream, finished):
    downstream.run_answer = ToolResultV1(outcome="succeeded", result={"sku": "SKU-PEN-BLUE", "on_hand": 85})

    view = await start(service, "get_product", PEN, source="model", run_id="run_1")

    assert (view.status, view.outcome, view.result) == ("finished", "succeeded", {"sku": "SKU-PEN-BLUE", "on_hand": 85})
    assert [(cmd.tool, cmd.arguments, cmd.requested_by, cmd.assertion) for cmd in downstream.runs] == [
        ("get_product", PEN, "alice", "as-1")]
    assert uow.event_types("ses_1") == ["tool_started", "tool_finished"]
    assert [m["seq"] for m in uow.sent_on(session_events_subject("ses_1"))] == [1, 2]  # each event to the outbox
    assert uow.units == 2  # looked up, then recorded once, finished, with both events
    assert uow.call(KEY).assertion == "as-1"
    assert len(finished) == 1  # the run driver hears of it


async def test_the_run_driver_hears_only_of_a_models_calls(service, finished):
    await start(service, "get_product", PEN)

    assert finished == []  # an external agent's call: no run waits for it


async def test_the_same_call_again_is_answered_from_the_record_without_running_it_again(service, uow, downstream):
    first = await start(service, "get_product", PEN)
    again = await start(service, "get_product", PEN)

    assert again == first
    assert len(downstream.runs) == 1
    assert uow.event_types("ses_1") == ["tool_started", "tool_finished"]


async def test_a_read_a_concurrent_delivery_recorded_first_is_answered_with_that_record(service, uow, downstream):
    answers = iter([{"on_hand": 1}, {"on_hand": 2}])
    plain_read = downstream.read

    async def read_overtaken(cmd):
        result = await plain_read(cmd)
        result = result.model_copy(update={"result": next(answers)})
        if len(downstream.runs) == 1:  # the other delivery reads and records while this one waits for the ERP
            await start(service, "get_product", PEN)
        return result

    downstream.read = read_overtaken
    view = await start(service, "get_product", PEN)

    assert view.result == {"on_hand": 2}  # the recorded answer, the first to commit
    assert uow.event_types("ses_1") == ["tool_started", "tool_finished"]


async def test_the_same_call_id_with_other_arguments_is_a_conflict(service, downstream):
    await start(service, "get_product", PEN)

    with pytest.raises(Refused) as refused:
        await start(service, "get_product", {"sku": "SKU-PAPER-A4"})

    assert (refused.value.code, refused.value.status) == ("idempotency_conflict", 409)
    assert len(downstream.runs) == 1


async def test_the_call_row_stores_the_versioned_request_digest(service, uow):
    await start(service, "get_product", PEN)

    assert uow.call(KEY).request_hash == request_digest({"tool": "get_product", "arguments": PEN})


async def test_a_call_recorded_before_the_upgrade_is_still_its_repeat(service, uow, downstream):
    first = await start(service, "get_product", PEN)
    pre_upgrade = "sha256:" + hashlib.sha256(rfc8785.dumps({"tool": "get_product", "arguments": PEN})).hexdigest()
    uow.state.calls[KEY] = replace(uow.call(KEY), request_hash=pre_upgrade)

    again = await start(service, "get_product", {"sku": "SKU-PEN-BLUE"})
    with pytest.raises(Refused) as refused:
        await start(service, "get_product", {"sku": "SKU-PAPER-A4"})

    assert again == first and len(downstream.runs) == 1
    assert (refused.value.code, refused.value.status) == ("idempotency_conflict", 409)


@pytest.mark.parametrize("session_id, owner", [("ses_unknown", "alice"), ("ses_1", "mallory")])
async def test_a_call_in_a_session_that_is_not_the_callers_is_not_found(service, uow, session_id, owner):
    with pytest.raises(Refused) as refused:
        await service.start(session_id=session_id, owner=owner, tool="get_product", raw_arguments=PEN, call_id="c-1")

    assert (refused.value.code, refused.value.status) == ("not_found", 404)
    assert uow.state.calls == {} and uow.state.events == []


@pytest.mark.parametrize("tool, arguments, code, status", [
    ("launch_rocket", {}, "unknown_tool", 422),
    ("get_product", {"sku": "SKU-PEN-BLUE", "colour": "red"}, "invalid_arguments", 422),
    ("adjust_stock", {"sku": "SKU-PEN-BLUE", "delta": 0, "reason": "x"}, "invalid_arguments", 422),
])
async def test_a_call_the_catalog_refuses_records_nothing(service, uow, downstream, tool, arguments, code, status):
    with pytest.raises(Refused) as refused:
        await start(service, tool, arguments)

    assert (refused.value.code, refused.value.status) == (code, status)
    assert uow.state.calls == {} and uow.state.events == [] and downstream.runs == []


async def test_a_tool_the_policy_denies_records_nothing(service, uow, downstream):
    downstream.actions["get_product"] = "deny"

    with pytest.raises(Refused) as refused:
        await start(service, "get_product", PEN)

    assert (refused.value.code, refused.value.status) == ("policy_denied", 403)
    assert uow.state.calls == {} and downstream.runs == []


async def test_a_draft_the_erp_rejects_finishes_business_rejected(service, downstream):
    downstream.run_answer = ToolResultV1(outcome="business_rejected",
                                         error={"code": "unknown_customer", "message": "no customer C-1001"})

    view = await start(service, "create_order_draft", DRAFT)

    assert (view.outcome, view.error.code, view.error.message) == ("business_rejected", "unknown_customer",
                                                                   "no customer C-1001")


async def test_an_erp_refusal_that_is_no_business_outcome_fails_the_call(service, downstream):
    downstream.run_answer = reply_error("invalid_arguments", "line qty too large", 422)

    view = await start(service, "create_order_draft", DRAFT)

    assert (view.outcome, view.error.code, view.error.message) == ("failed", "invalid_arguments",
                                                                   "line qty too large")


async def test_a_draft_refused_for_an_expired_assertion_fails_and_says_why(service, uow, downstream):
    downstream.run_answer = reply_error("invalid_message", "the assertion expired", 422, reason="assertion_expired")

    view = await start(service, "create_order_draft", DRAFT)

    assert (view.outcome, view.error.code, view.error.details) == ("failed", "invalid_message",
                                                                   {"reason": "assertion_expired"})
    assert uow.call(KEY).call.model_content()["error"]["details"] == {"reason": "assertion_expired"}  # the model's


async def test_an_erp_failure_of_its_own_is_raised_and_a_retry_reads_again(service, uow, downstream):
    downstream.run_answer = reply_error("internal_error", "database away", 503)

    with pytest.raises(ReplyError):
        await start(service, "get_product", PEN)
    assert uow.state.calls == {} and uow.state.events == []  # a read is recorded only with its answer
    downstream.run_answer = ToolResultV1(outcome="succeeded", result={"sku": "SKU-PEN-BLUE"})
    view = await start(service, "get_product", PEN)

    assert view.outcome == "succeeded"
    assert len(downstream.runs) == 2
    assert uow.event_types("ses_1") == ["tool_started", "tool_finished"]


# --- writes: recorded, then prepared; the ERP asks for the approval -----------------------------------
async def test_a_write_is_recorded_then_prepared_with_its_assertion_and_asks_for_nothing_more(
        service, uow, downstream, finished):
    downstream.stock_check = "sufficient"

    view = await start(service, "adjust_stock", STOCK)

    assert (view.status, view.pending_id, view.outcome) == ("running", None, None)  # prepared, approval to come
    [prepared] = downstream.prepares
    assert (prepared.operation_id, prepared.session_id, prepared.call_id) == (view.operation_id, "ses_1", "c-1")
    assert (prepared.requested_by, prepared.assertion, prepared.arguments) == ("alice", "as-1", STOCK)
    assert (prepared.stock_check, prepared.supersedes, prepared.edited_by) == ("sufficient", None, None)
    assert uow.event_types("ses_1") == ["tool_started"]
    assert uow.call(KEY).call.state == "preparing" and uow.call(KEY).assertion == "as-1"
    assert downstream.runs == [] and finished == []
    assert uow.units == 2  # looked up, recorded; the prepare's answer changes nothing


async def test_a_write_the_policy_lets_through_without_approval_runs_like_a_draft(service, downstream):
    downstream.actions["adjust_stock"] = "allow"

    view = await start(service, "adjust_stock", STOCK)

    assert view.outcome == "succeeded"
    assert downstream.prepares == [] and len(downstream.runs) == 1


@pytest.mark.parametrize("error, outcome", [
    (reply_error("insufficient_stock", "only 2 on hand", 409), "business_rejected"),
    (reply_error("internal_error", "gave up", 503), "failed"),
    (reply_error("invalid_message", "the assertion expired", 422, reason="assertion_expired"), "failed"),
])
async def test_a_write_the_erp_will_not_prepare_ends_with_that_refusal(service, uow, downstream, error, outcome):
    downstream.prepare_answer = error

    view = await start(service, "adjust_stock", STOCK)

    assert (view.outcome, view.error.code, view.error.message) == (outcome, error.error.code, error.error.message)
    assert uow.event_types("ses_1") == ["tool_started", "tool_finished"]


async def test_a_prepare_without_an_answer_is_sent_again_by_the_redelivered_command(service, uow, downstream):
    downstream.prepare_answer = ServiceUnavailable("cmd.erp.prepare", "no answer in time")
    with pytest.raises(ServiceUnavailable):
        await start(service, "adjust_stock", STOCK)
    downstream.prepare_answer = None

    view = await start(service, "adjust_stock", STOCK, assertion="as-2")  # the redelivery, or the client's retry

    assert view.status == "running"
    assert [(p.operation_id, p.assertion) for p in downstream.prepares] == [(view.operation_id, "as-1"),
                                                                            (view.operation_id, "as-2")]
    assert uow.event_types("ses_1") == ["tool_started"]  # recorded once


async def test_a_crash_after_recording_a_write_leaves_it_preparing_and_the_redelivery_prepares_it_once(
        service, uow, downstream, monkeypatch):
    reached = []

    def crash(name: str) -> None:
        reached.append((name, uow.call(KEY).call.state.value, len(downstream.prepares)))  # as committed then
        if name == "agent.call.after_record":
            raise SystemExit(137)

    monkeypatch.setattr(tool_calls, "failpoint", crash)
    with pytest.raises(SystemExit):
        await start(service, "adjust_stock", STOCK)
    assert reached == [("agent.call.after_record", "preparing", 0)]  # recorded, the prepare not sent
    assert uow.event_types("ses_1") == ["tool_started"]

    await start(service, "adjust_stock", STOCK)  # the redelivered command

    assert len(reached) == 1  # recorded already: the failpoint is not on the redelivery's path
    assert [p.operation_id for p in downstream.prepares] == [uow.call(KEY).operation_id]
    assert uow.event_types("ses_1") == ["tool_started"]


async def test_on_start_an_external_write_left_preparing_by_its_request_is_prepared_once_more(service, uow,
                                                                                              downstream):
    # The request's handler stored the write and died before its prepare went out (here: the ERP was away, and
    # ``req.agent.tool_call`` is a core request that no stream delivers again).
    downstream.prepare_answer = ServiceUnavailable("erpilot.v1.cmd.erp.prepare", "no answer in time")
    with pytest.raises(ServiceUnavailable):
        await start(service, "adjust_stock", STOCK)
    with pytest.raises(ServiceUnavailable):
        await start(service, "adjust_stock", STOCK, call_id="c-model", source="model", run_id="run_1")
    downstream.prepare_answer = None
    downstream.prepares.clear()

    assert await service.drive_left_calls() == 1

    [prepared] = downstream.prepares  # the external call only: a model's call is its run resumer's
    assert (prepared.call_id, prepared.requested_by, prepared.assertion) == ("c-1", "alice", "as-1")
    assert prepared.operation_id == uow.call(KEY).operation_id  # the call's own: the ERP answers a repeat once
    assert await service.drive_left_calls() == 1  # still preparing until its approval is recorded: harmless
    assert uow.event_types("ses_1").count("tool_started") == 2  # one per call, none added by driving


async def test_on_start_a_finished_or_read_call_is_left_alone(service, downstream):
    await start(service, "get_product", PEN)
    await start(service, "create_order_draft", DRAFT, call_id="c-draft")

    assert await service.drive_left_calls() == 0
    assert len(downstream.runs) == 2


async def test_later_passes_drive_only_a_call_left_untouched_for_their_interval(service, uow, downstream):
    downstream.prepare_answer = ServiceUnavailable("erpilot.v1.cmd.erp.prepare", "no answer in time")
    with pytest.raises(ServiceUnavailable):  # the request's handler gave up on the ERP; its client never retries
        await start(service, "adjust_stock", STOCK)
    downstream.prepare_answer = None
    downstream.prepares.clear()

    assert await service.drive_left_calls(untouched_for_seconds=30) == 0  # perhaps still in a handler's hands
    uow.advance(31)
    assert await service.drive_left_calls(untouched_for_seconds=30) == 1
    [prepared] = downstream.prepares
    assert prepared.operation_id == uow.call(KEY).operation_id
