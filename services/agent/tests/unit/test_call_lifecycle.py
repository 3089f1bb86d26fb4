"""A write after its prepare, on the memory unit of work: the approval service's events (requested, resolved,
request refused) and the ERP's outcome (operation finished) move it on, each recorded once and in the order of
SPEC §4 whatever order they arrive in. The agent sends nothing after the prepare."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.service_layer import tool_calls
from erpilot_agent.service_layer.run_tools import PipelineTools
from erpilot_contracts.approval.v1 import ApprovalRequestRefusedV1, ApprovalResolvedV1
from erpilot_contracts.base import ErrorV1
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_platform.broker import TransientError

from ..fakes import approval_record

pytestmark = pytest.mark.unit
STOCK = {"sku": "SKU-PEN-BLUE", "delta": -3, "reason": "damaged in transit"}
KEY = call_key("ses_1", "c-1")
DONE = datetime(2026, 3, 2, 9, 5, tzinfo=UTC)


@pytest.fixture
async def prepared(service, downstream):
    """A model run's stock adjustment, prepared at the ERP (its approval not known here yet)."""
    await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK, call_id="c-1",
                        assertion="as-1", source="model", run_id="run_1")
    [prepare] = downstream.prepares
    return prepare


@pytest.fixture
async def waiting(service, prepared):
    """The same call once the approval service's ``evt.approval.requested`` for ``pa_1`` was recorded."""
    await service.on_approval_requested(approval_record(prepared, "pa_1"))
    return prepared


def resolved(status: str, *, pending_id: str = "pa_1", comment: str | None = None) -> ApprovalResolvedV1:
    return ApprovalResolvedV1(pending_id=pending_id, call_id="c-1", session_id="ses_1", operation_id="op",
                              status=status, decided_by="mgr", comment=comment)


def finished_operation(operation_id: str, status: str = "committed", call_id: str = "c-1") -> OperationStatusV1:
    if status == "committed":
        return OperationStatusV1(operation_id=operation_id, tool="adjust_stock", status=status, session_id="ses_1",
                                 call_id=call_id, pending_id="pa_1", decided_by="mgr", result={"on_hand": 82},
                                 committed_at=DONE)
    return OperationStatusV1(operation_id=operation_id, tool="adjust_stock", status=status, session_id="ses_1",
                             call_id=call_id, error=ErrorV1(code="stock_changed", message="on hand is 1 now"))


def refused(operation_id: str) -> ApprovalRequestRefusedV1:
    return ApprovalRequestRefusedV1(session_id="ses_1", call_id="c-1", operation_id=operation_id,
                                    error=ErrorV1(code="policy_denied", message="the policy denies it", status=403),
                                    refused_at=DONE)


async def test_the_requested_approval_is_shown_pending_once(service, uow, downstream, waiting):
    await service.on_approval_requested(approval_record(waiting, "pa_1"))  # redelivered

    view = await service.view(KEY)
    assert (view.status, view.pending_id, view.approval_status) == ("awaiting_approval", "pa_1", "pending")
    assert view.approval_url == "https://erpilot.test/resume/pa_1"
    assert uow.event_types("ses_1") == ["tool_started", "approval_pending"]
    assert downstream.policy_versions_seen == ["test", "test"]  # a new policy version drops the cached one


async def test_an_approval_makes_the_call_executing_at_once_and_the_erps_outcome_finishes_it(
        service, uow, downstream, waiting, finished):
    units = uow.units
    await service.on_approval_resolved(resolved("approved"))
    assert uow.units - units == 1  # approval_resolved and tool_executing in one transaction
    assert (await service.view(KEY)).status == "executing" and finished == []

    await service.on_operation_finished(finished_operation(waiting.operation_id))

    view = await service.view(KEY)
    assert (view.status, view.outcome, view.result) == ("finished", "succeeded", {"on_hand": 82})
    assert uow.event_types("ses_1") == ["tool_started", "approval_pending", "approval_resolved", "tool_executing",
                                        "tool_finished"]
    assert len(downstream.prepares) == 1 and downstream.runs == []  # nothing sent after the prepare
    assert finished == [KEY]  # the run waiting for it is driven on


async def test_redelivered_decisions_and_outcomes_record_nothing_more(service, uow, waiting, finished):
    await service.on_approval_resolved(resolved("approved"))
    await service.on_operation_finished(finished_operation(waiting.operation_id))
    events = list(uow.state.events)

    await service.on_approval_resolved(resolved("approved"))
    await service.on_operation_finished(finished_operation(waiting.operation_id))

    assert uow.state.events == events and finished == [KEY]


async def test_an_outcome_that_overtakes_the_decision_waits_for_it(service, uow, waiting):
    with pytest.raises(TransientError):  # redelivered later: the decision must be shown first
        await service.on_operation_finished(finished_operation(waiting.operation_id))
    assert uow.event_types("ses_1") == ["tool_started", "approval_pending"]

    await service.on_approval_resolved(resolved("approved"))
    await service.on_operation_finished(finished_operation(waiting.operation_id))

    assert uow.event_types("ses_1")[-3:] == ["approval_resolved", "tool_executing", "tool_finished"]


async def test_an_outcome_before_the_approval_is_even_known_waits_too(service, prepared):
    with pytest.raises(TransientError):
        await service.on_operation_finished(finished_operation(prepared.operation_id))


async def test_an_operation_the_erp_rejects_at_commit_ends_business_rejected(service, waiting):
    await service.on_approval_resolved(resolved("approved"))

    await service.on_operation_finished(finished_operation(waiting.operation_id, "rejected"))

    view = await service.view(KEY)
    assert (view.outcome, view.error.code, view.error.message) == ("business_rejected", "stock_changed",
                                                                   "on hand is 1 now")


async def test_an_outcome_for_no_call_here_or_another_operation_changes_nothing(service, uow, waiting):
    await service.on_approval_resolved(resolved("approved"))
    events = list(uow.state.events)

    await service.on_operation_finished(finished_operation("op_other", call_id="c-404"))
    await service.on_operation_finished(finished_operation("op_replaced_by_an_edit"))
    await service.on_operation_finished(OperationStatusV1(operation_id="op_x", tool="adjust_stock", status="committed"))

    assert uow.state.events == events and (await service.view(KEY)).status == "executing"


async def test_a_crash_after_the_outcome_arrived_records_it_once_from_the_redelivered_event(
        service, uow, waiting, monkeypatch, finished):
    await service.on_approval_resolved(resolved("approved"))
    reached = []

    def crash(name: str) -> None:
        reached.append((name, uow.call(KEY).call.state.value))  # as committed at that moment
        if len(reached) == 1:
            raise SystemExit(137)

    monkeypatch.setattr(tool_calls, "failpoint", crash)
    with pytest.raises(SystemExit):
        await service.on_operation_finished(finished_operation(waiting.operation_id))
    assert reached == [("agent.commit.after_send", "executing")]  # the outcome is not recorded

    await service.on_operation_finished(finished_operation(waiting.operation_id))  # the event is redelivered

    assert uow.event_types("ses_1").count("tool_finished") == 1 and finished == [KEY]
    assert (await service.view(KEY)).outcome == "succeeded"


@pytest.mark.parametrize("status", ["rejected", "cancelled", "expired"])
async def test_a_decision_against_the_write_ends_it_not_executed(service, uow, waiting, status):
    await service.on_approval_resolved(resolved(status, comment="not today"))

    view = await service.view(KEY)
    assert (view.outcome, view.error.code, view.error.message) == ("not_executed", status,
                                                                   f"approval {status}: not today")
    assert uow.event_types("ses_1")[-2:] == ["approval_resolved", "tool_finished"]


async def test_a_withdrawn_approval_is_told_as_withdrawn(service, uow, waiting):
    await service.on_approval_resolved(resolved("withdrawn"))

    assert uow.event_types("ses_1")[-2:] == ["approval_withdrawn", "tool_finished"]
    assert (await service.view(KEY)).outcome == "not_executed"


async def test_a_decision_on_an_approval_not_known_yet_is_retried_later(service, uow, waiting):
    events = list(uow.state.events)

    with pytest.raises(TransientError):
        await service.on_approval_resolved(resolved("approved", pending_id="pa_9"))

    assert uow.state.events == events and (await service.view(KEY)).status == "awaiting_approval"


async def test_a_decision_for_a_call_that_is_not_here_changes_nothing(service, uow):
    await service.on_approval_resolved(resolved("rejected"))

    assert uow.state.calls == {} and uow.state.events == []


async def test_an_edit_replaces_the_pending_approval_with_its_new_version(service, uow, waiting):
    edited = {**STOCK, "delta": -2}
    new_version = approval_record(waiting, "pa_2", operation_id="op_edited", arguments=edited, fingerprint="fp2",
                                  supersedes="pa_1", edited_by="mgr")

    await service.on_approval_requested(new_version)
    await service.on_approval_resolved(resolved("superseded"))  # told with the new version already

    view = await service.view(KEY)
    assert (view.pending_id, view.operation_id, view.arguments) == ("pa_2", "op_edited", edited)
    assert view.approval_url == "https://erpilot.test/resume/pa_2"
    resolutions = uow.events_of("ses_1", "approval_resolved")
    assert [(r["pending_id"], r["status"], r["decided_by"]) for r in resolutions] == [("pa_1", "superseded", "mgr")]
    assert uow.event_types("ses_1")[-1] == "approval_pending"
    assert uow.events_of("ses_1", "approval_pending")[-1]["edited_by"] == "mgr"

    await service.on_approval_resolved(resolved("approved", pending_id="pa_2"))
    await service.on_operation_finished(finished_operation(waiting.operation_id))  # the replaced version: no
    assert (await service.view(KEY)).status == "executing"
    await service.on_operation_finished(finished_operation("op_edited"))
    assert (await service.view(KEY)).outcome == "succeeded"


async def test_a_request_the_approval_service_refused_fails_the_call(service, uow, prepared, finished):
    await service.on_request_refused(refused(prepared.operation_id))
    await service.on_request_refused(refused(prepared.operation_id))  # redelivered

    view = await service.view(KEY)
    assert (view.outcome, view.error.code) == ("failed", "policy_denied")
    assert uow.event_types("ses_1") == ["tool_started", "tool_finished"] and finished == [KEY]


async def test_a_refused_edit_leaves_the_call_waiting_for_its_current_version(service, uow, waiting):
    events = list(uow.state.events)

    await service.on_request_refused(refused("op_of_an_edit"))

    assert uow.state.events == events and (await service.view(KEY)).status == "awaiting_approval"


async def test_the_run_driver_sees_each_call_of_the_session_with_its_state(service, waiting):
    await service.start(session_id="ses_1", owner="alice", tool="get_product", raw_arguments={"sku": "SKU-PEN-BLUE"},
                        call_id="c-2")
    tools = PipelineTools(service)

    status = await tools.status("ses_1", ["c-1", "c-2", "c-unknown"])

    assert sorted(status) == ["c-1", "c-2"]
    assert (status["c-1"].state, status["c-1"].content) == ("awaiting_approval", None)
    assert status["c-1"].live["status"] == "awaiting_approval"
    assert (status["c-2"].state, status["c-2"].content) == ("finished", {"status": "succeeded",
                                                                         "result": {"ok": True}})


async def test_the_run_driver_is_offered_no_tool_the_policy_denies(service, downstream):
    downstream.actions.update({"refund_payment": "deny", "get_product": "allow"})

    assert await PipelineTools(service).denied_tools() == frozenset({"refund_payment"})
