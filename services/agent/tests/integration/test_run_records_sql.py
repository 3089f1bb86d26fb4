"""What a run stores (``service_layer.run_records``) on PostgreSQL: starting runs (ownership, one working run,
idempotency), replies and results written with their events under the session's lock, a cancel that records
the withdrawal in its own transaction (the drivers' advisory lock is a repository case: ``repository_cases``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from erpilot_agent.adapters.tables import outbox
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.history import assistant_message
from erpilot_agent.domain.tool_calls import PendingApproval, ToolCall
from erpilot_agent.service_layer.ports import Work
from erpilot_agent.service_layer.run_ports import ToolResult
from erpilot_agent.service_layer.run_records import RunRecords
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_platform.refusals import Refused

from .conftest import event_types, new_session

pytestmark = pytest.mark.integration


@pytest.fixture
def records(uow) -> RunRecords:
    return RunRecords(uow)


async def refused_code(coro) -> str:
    with pytest.raises(Refused) as caught:
        await coro
    return caught.value.code


async def test_a_run_starts_once_per_message_and_one_at_a_time(engine, uow, records):
    session_id = await new_session(uow)
    start = records.start_run

    assert await refused_code(start(session_id=session_id, owner="mallory", message_id="m1", text="hi")) == "not_found"
    run_id, created = await start(session_id=session_id, owner="alice", message_id="m1", text="hi", assertion="as-1")
    assert created
    assert await start(session_id=session_id, owner="alice", message_id="m1", text="hi") == (run_id, False)
    assert await refused_code(start(session_id=session_id, owner="alice", message_id="m1", text="other")) \
        == "idempotency_conflict"
    assert await refused_code(start(session_id=session_id, owner="alice", message_id="m2", text="next")) \
        == "run_in_progress"

    snapshot = await records.load(run_id)
    assert [item.entry for item in snapshot.history] == [{"role": "user", "content": "hi"}]
    assert (snapshot.run.owner, snapshot.run.status, snapshot.run.assertion) == ("alice", "running", "as-1")
    assert await event_types(engine, session_id) == ["message", "run_started"]

    await records.fail(run_id, "model_error", "boom")
    assert (await records.get_run(run_id)).status == "failed"
    second, created = await start(session_id=session_id, owner="alice", message_id="m2", text="next")
    assert created and second != run_id
    assert await event_types(engine, session_id) == ["message", "run_started", "run_failed", "message",
                                                     "run_started"]


async def add_waiting_call(uow, session_id: str, run_id: str) -> str:
    call_id = f"{run_id}:w"
    call = ToolCall(call_id, "submit_order", {"draft_id": "D-1", "revision": 1})
    call.start()
    call.await_approval(PendingApproval(f"pa_{run_id}", "fp", datetime.now(UTC), {}, "url"))

    async def work(unit: Work) -> None:
        await unit.calls.add(call_key=call_key(session_id, call_id), call_id=call_id, session_id=session_id,
                             run_id=run_id, source="model", request_hash="v1:sha256:x",
                             operation_id=f"op_{uuid.uuid4().hex}", assertion="as-1", call=call)

    await uow.run(work)
    return call_id


async def waiting_run(uow, records: RunRecords, session_id: str, message_id: str = "m") -> tuple[str, str]:
    run_id, _ = await records.start_run(session_id=session_id, owner="alice", message_id=message_id, text="submit")
    call_id = f"{run_id}:w"
    await records.record_reply(run_id, assistant_message(None, [
        {"id": call_id, "name": "submit_order", "arguments": {"draft_id": "D-1", "revision": 1}}]))
    await add_waiting_call(uow, session_id, run_id)
    await records.record_results(run_id, [], waiting=True)
    return run_id, call_id


async def test_replies_results_and_waiting_are_recorded_with_their_events(engine, uow, records):
    session_id = await new_session(uow)
    run_id, call_id = await waiting_run(uow, records, session_id)

    assert (await records.get_run(run_id)).status == "waiting" and (await records.get_run(run_id)).steps == 1
    assert not await records.resumable(run_id) and run_id not in await records.runs_to_resume(stale_seconds=0)
    assert await records.run_of_call(call_key(session_id, call_id)) == run_id

    result = ToolResult(call_id, {"status": "succeeded", "result": {"order_id": "O-1"}})
    await records.record_results(run_id, [result], waiting=False)
    await records.record_results(run_id, [result], waiting=False)  # a second driver's copy is not stored
    await records.record_reply(run_id, assistant_message("Order O-1 placed."))

    snapshot = await records.load(run_id)
    assert [item.entry["role"] for item in snapshot.history] == ["user", "assistant", "tool", "assistant"]
    assert snapshot.run.status == "finished" and snapshot.run.steps == 2
    assert await event_types(engine, session_id) == ["message", "run_started", "message", "run_finished"]


async def test_a_refused_call_gets_its_start_and_finish_events(engine, uow, records):
    session_id = await new_session(uow)
    run_id, _ = await records.start_run(session_id=session_id, owner="alice", message_id="m", text="x")
    call_id = f"{run_id}:bad"
    await records.record_reply(run_id, assistant_message(None, [{"id": call_id, "name": "nope", "arguments": {}}]))
    content = {"status": "failed", "error": {"code": "unknown_tool", "message": "unknown tool 'nope'"}}

    await records.record_results(run_id, [ToolResult(call_id, content, rejected=("nope", {}))], waiting=False)

    assert (await event_types(engine, session_id))[-2:] == ["tool_started", "tool_finished"]


async def test_cancel_ends_a_waiting_run_once_and_records_the_withdrawal_in_its_own_transaction(engine, uow, records):
    session_id = await new_session(uow)
    run_id, call_id = await waiting_run(uow, records, session_id)
    cancel = records.cancel

    assert await refused_code(cancel(session_id=session_id, owner="mallory", run_id=run_id)) == "not_found"
    assert await refused_code(cancel(session_id="ses_other", owner="alice", run_id=run_id)) == "not_found"
    assert await cancel(session_id=session_id, owner="alice", run_id=run_id, assertion="as-c") == [f"pa_{run_id}"]
    assert await cancel(session_id=session_id, owner="alice", run_id=run_id) == [f"pa_{run_id}"]  # idempotent

    assert (await records.get_run(run_id)).status == "cancelled"
    assert (await event_types(engine, session_id)).count("run_failed") == 1
    assert run_id not in await records.runs_to_resume(stale_seconds=0)
    await records.record_reply(run_id, assistant_message("too late"))  # a driver that was mid-step records nothing
    assert (await records.get_run(run_id)).status == "cancelled"
    async with engine.connect() as conn:
        [payload] = (await conn.execute(select(outbox.c.payload).where(
            outbox.c.subject == subjects.AGENT_EVT_RUN_CANCELLED,
            outbox.c.msg_id.startswith(f"run_cancelled:{run_id}.")))).scalars().all()
    event = RunCancelledV1.model_validate(payload)
    assert (event.session_id, event.run_id, event.owner, event.call_ids, event.assertion) == (
        session_id, run_id, "alice", [call_id], "as-c")

    working, _ = await records.start_run(session_id=session_id, owner="alice", message_id="m2", text="next")
    assert await refused_code(cancel(session_id=session_id, owner="alice", run_id=working)) == "run_in_progress"
    await records.finish(working)
    assert await refused_code(cancel(session_id=session_id, owner="alice", run_id=working)) == "run_not_waiting"
    async with engine.connect() as conn:
        assert await conn.scalar(select(outbox.c.msg_id).where(
            outbox.c.msg_id.startswith(f"run_cancelled:{working}."))) is None  # a refused cancel records no withdrawal


async def test_failed_attempts_are_counted_and_reset_by_progress(uow, records):
    session_id = await new_session(uow)
    run_id, _ = await records.start_run(session_id=session_id, owner="alice", message_id="m", text="x")

    counts = [await records.note_failure(run_id) for _ in range(3)]
    assert [attempts for attempts, _ in counts] == [1, 2, 3]
    assert 0 <= counts[0][1] <= counts[1][1] <= counts[2][1] < 60  # seconds since the first failure

    await records.record_reply(run_id, assistant_message(None, [{"id": f"{run_id}:a", "name": "get_product",
                                                                 "arguments": {"sku": "S"}}]))
    assert (await records.note_failure(run_id))[0] == 1  # a stored reply started the count again
    await records.fail(run_id, "retries_exhausted", "gave up")
    assert await records.note_failure(run_id) == (0, 0.0)  # an ended run counts nothing
