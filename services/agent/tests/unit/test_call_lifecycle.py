"""A write after it waits for a person, on the in-memory unit of work and a fake ERP and approval
service: decisions, the commit with the grant, edits, and the reconciler settling lost commit answers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.service_layer.reconciler import reconcile_due, reconcile_once
from erpilot_agent.service_layer.run_tools import PipelineTools
from erpilot_platform.broker import ServiceUnavailable, TransientError

pytestmark = pytest.mark.unit
STOCK = {"sku": "SKU-PEN-BLUE", "delta": -3, "reason": "damaged in transit"}
KEY = call_key("ses_1", "c-1")


@pytest.fixture
async def waiting(service) -> dict:
    """A model run's stock adjustment waiting for approval ``pa_1``."""
    return await service.start(session_id="ses_1", owner="alice", tool="adjust_stock", raw_arguments=STOCK,
                               call_id="c-1", source="model", run_id="run_1")


async def resolve(service, make, waiting: dict, status: str, *, pending_id: str = "pa_1", grant: bool = True,
                  comment: str | None = None) -> None:
    await service.on_approval_resolved(
        session_id="ses_1", call_id="c-1", pending_id=pending_id, status=status, decided_by="mgr", comment=comment,
        grant=make.grant(pending_id, waiting["operation_id"]) if grant and status == "approved" else None)


async def test_an_approval_commits_with_its_grant_and_finishes_the_call(service, store, make, downstream, waiting,
                                                                        finished):
    units_before = store.units
    await resolve(service, make, waiting, "approved")
    units = store.units - units_before  # before the view below reads it

    view = await service.view(KEY)
    assert (view["status"], view["outcome"], view["result"]) == ("finished", "succeeded",
                                                                 {"committed": waiting["operation_id"]})
    [(operation_id, grant)] = downstream.commits
    assert (operation_id, grant.pending_id, grant.decided_by) == (waiting["operation_id"], "pa_1", "mgr")
    assert store.event_types("ses_1") == ["tool_started", "approval_pending", "approval_resolved", "tool_executing",
                                          "tool_finished"]
    assert store.commit_sent == {KEY}
    assert finished == [KEY]
    assert units == 2  # approved with the intent (executing), finished: one transaction each, no reads between


async def test_a_redelivered_approval_commits_nothing_more(service, store, make, downstream, waiting):
    await resolve(service, make, waiting, "approved")
    events = list(store.events)

    await resolve(service, make, waiting, "approved")

    assert len(downstream.commits) == 1
    assert store.events == events


@pytest.mark.parametrize("status", ["rejected", "cancelled", "expired"])
async def test_a_decision_against_the_write_ends_it_not_executed(service, store, make, downstream, waiting, status):
    await resolve(service, make, waiting, status, comment="not today")

    view = await service.view(KEY)
    assert (view["outcome"], view["error"]) == ("not_executed", {"code": status,
                                                                 "message": f"approval {status}: not today"})
    assert downstream.commits == []
    assert store.event_types("ses_1")[-2:] == ["approval_resolved", "tool_finished"]


async def test_a_withdrawn_approval_is_told_as_withdrawn(service, store, make, waiting):
    await resolve(service, make, waiting, "withdrawn")

    assert store.event_types("ses_1")[-2:] == ["approval_withdrawn", "tool_finished"]
    assert (await service.view(KEY))["outcome"] == "not_executed"


async def test_a_decision_on_an_approval_not_known_yet_is_retried_later(service, store, make, waiting):
    events = list(store.events)

    with pytest.raises(TransientError):
        await resolve(service, make, waiting, "approved", pending_id="pa_9")

    assert store.events == events and (await service.view(KEY))["status"] == "awaiting_approval"


async def test_a_decision_for_a_call_that_is_not_here_changes_nothing(service, store, make):
    await service.on_approval_resolved(session_id="ses_1", call_id="c-404", pending_id="pa_1", status="rejected",
                                       decided_by="mgr", comment=None, grant=None)

    assert store.rows == {} and store.events == []


async def test_an_edit_replaces_the_pending_approval_with_its_new_version(service, store, make, downstream, waiting):
    edited = {**STOCK, "delta": -2}
    new_version = make.approval_record("ses_1", "c-1", "pa_2", "op_edited", edited, "fp2", supersedes="pa_1",
                                       edited_by="mgr")

    await service.on_approval_requested(new_version)
    await resolve(service, make, waiting, "superseded", grant=False)  # told with the new version already

    view = await service.view(KEY)
    assert (view["pending_id"], view["operation_id"], view["arguments"]) == ("pa_2", "op_edited", edited)
    assert view["approval_url"] == "https://erpilot.test/resume/pa_2"
    resolved = [data for _, type_, data in store.events if type_ == "approval_resolved"]
    assert [(r["pending_id"], r["status"], r["decided_by"]) for r in resolved] == [("pa_1", "superseded", "mgr")]
    assert store.event_types("ses_1")[-1] == "approval_pending"


async def test_a_commit_the_erp_rejects_ends_business_rejected(service, make, downstream, waiting):
    downstream.commit_answer = "rejected"

    await resolve(service, make, waiting, "approved")

    view = await service.view(KEY)
    assert (view["outcome"], view["error"]) == ("business_rejected",
                                                {"code": "insufficient_stock", "message": "not enough stock"})


async def test_a_commit_refused_for_its_grant_fails_the_call(service, make, downstream, waiting):
    downstream.commit_answer = make.reply_error("invalid_grant", "signature does not match", 403)

    await resolve(service, make, waiting, "approved")

    view = await service.view(KEY)
    assert (view["outcome"], view["error"]) == ("failed", {"code": "invalid_grant",
                                                           "message": "signature does not match"})


async def test_the_reconciler_records_a_commit_whose_answer_was_lost_without_sending_it_again(
        service, make, downstream, waiting):
    downstream.lose_answer = True
    with pytest.raises(ServiceUnavailable):
        await resolve(service, make, waiting, "approved")  # the ERP committed; the answer never came
    assert (await service.view(KEY))["status"] == "executing"

    settled = await reconcile_once(service, older_than=timedelta(0))

    assert settled == 1
    view = await service.view(KEY)
    assert (view["outcome"], view["result"]) == ("succeeded", {"committed": waiting["operation_id"]})
    assert len(downstream.commits) == 1  # asked the ERP, did not commit again


async def test_the_reconciler_sleeps_until_a_call_in_flight_could_be_stuck(service, make, downstream, waiting):
    downstream.lose_answer = True
    with pytest.raises(ServiceUnavailable):
        await resolve(service, make, waiting, "approved")

    settled, again = await reconcile_due(service, older_than=timedelta(hours=1))

    assert settled == 0 and 3500 < again.seconds <= 3600.01  # not before it is an hour old, not polling
    assert len(downstream.commits) == 1


async def test_the_reconciler_sends_a_commit_the_erp_never_got(service, make, downstream, waiting):
    downstream.commit_answer = ServiceUnavailable("cmd.erp.commit", "no service is listening")
    with pytest.raises(ServiceUnavailable):
        await resolve(service, make, waiting, "approved")
    downstream.commit_answer = "committed"

    await reconcile_once(service, older_than=timedelta(0))

    assert [operation_id for operation_id, _ in downstream.commits] == [waiting["operation_id"]] * 2
    assert (await service.view(KEY))["outcome"] == "succeeded"


async def test_the_reconciler_leaves_calls_that_changed_recently_alone(service, make, downstream, waiting):
    downstream.lose_answer = True
    with pytest.raises(ServiceUnavailable):
        await resolve(service, make, waiting, "approved")

    assert await reconcile_once(service, older_than=timedelta(minutes=5)) == 0
    assert (await service.view(KEY))["status"] == "executing"


async def test_the_run_driver_sees_each_call_of_the_session_with_its_state(service, make, downstream, waiting):
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
