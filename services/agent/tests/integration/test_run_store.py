"""SqlRunStore on a real PostgreSQL: starting runs (ownership, one active run, idempotency), the
driver's lock, history and events written together, and which runs the resumer picks up."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from erpilot_agent.adapters import repository
from erpilot_agent.adapters.runs import SqlRunStore
from erpilot_agent.adapters.tables import outbox, session_events
from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.history import assistant_message
from erpilot_agent.service_layer.run_ports import RunRejected, ToolResult
from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_platform.db import create_engine

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def store(database_url):
    engine = create_engine(database_url, pool_size=4)
    yield SqlRunStore(engine)
    await engine.dispose()


async def new_session(store: SqlRunStore, owner: str = "alice") -> str:
    session_id = f"ses_{uuid.uuid4().hex[:20]}"
    async with store.engine.begin() as conn:
        await repository.create_session(conn, session_id, owner, None)
    return session_id


async def events(store: SqlRunStore, session_id: str) -> list[tuple[int, str]]:
    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(session_events.c.seq, session_events.c.type)
                                   .where(session_events.c.session_id == session_id)
                                   .order_by(session_events.c.seq))).all()
    return [(row.seq, row.type) for row in rows]


async def rejected_code(coro) -> str:
    with pytest.raises(RunRejected) as caught:
        await coro
    return caught.value.reply.error.code


async def test_a_run_starts_once_per_message_and_one_at_a_time(store):
    session_id = await new_session(store)
    start = store.start_run

    assert await rejected_code(start(session_id=session_id, owner="mallory", message_id="m1", text="hi")) \
        == "not_found"
    run_id, created = await start(session_id=session_id, owner="alice", message_id="m1", text="hi")
    assert created
    assert await start(session_id=session_id, owner="alice", message_id="m1", text="hi") == (run_id, False)
    assert await rejected_code(start(session_id=session_id, owner="alice", message_id="m1", text="other")) \
        == "idempotency_conflict"
    assert await rejected_code(start(session_id=session_id, owner="alice", message_id="m2", text="next")) \
        == "run_in_progress"

    snapshot = await store.load(run_id)
    assert [item.entry for item in snapshot.history] == [{"role": "user", "content": "hi"}]
    assert snapshot.run.owner == "alice" and snapshot.run.status == "running"
    assert await events(store, session_id) == [(1, "message"), (2, "run_started")]

    await store.fail(run_id, "model_error", "boom")
    assert (await store.get_run(run_id)).status == "failed"
    second, created = await start(session_id=session_id, owner="alice", message_id="m2", text="next")
    assert created and second != run_id
    assert await events(store, session_id) == [(1, "message"), (2, "run_started"), (3, "run_failed"),
                                               (4, "message"), (5, "run_started")]


async def test_only_one_driver_holds_a_session(store):
    async with store.lock("ses_x") as first:
        async with store.lock("ses_x") as second, store.lock("ses_y") as other:
            assert (first, second, other) == (True, False, True)
    async with store.lock("ses_x") as again:
        assert again


async def test_replies_results_and_waiting_are_recorded_with_their_events(store):
    session_id = await new_session(store)
    run_id, _ = await store.start_run(session_id=session_id, owner="alice", message_id="m", text="submit")
    assert (await store.get_run(run_id)).status == "running" and await store.has_running_runs()
    call_id = f"{run_id}:w"
    await store.record_reply(run_id, assistant_message("Submitting.", [
        {"id": call_id, "name": "submit_order", "arguments": {"draft_id": "D-1", "revision": 1}}]))
    key = call_key(session_id, call_id)
    async with store.engine.begin() as conn:
        await repository.insert_tool_call(
            conn, call_key=key, call_id=call_id, session_id=session_id, run_id=run_id, source="model",
            tool="submit_order", request_hash="sha256:x", arguments={}, operation_id=f"op_{uuid.uuid4().hex}",
            status="awaiting_approval", lifecycle={})
    await store.record_results(run_id, [], waiting=True)

    assert (await store.get_run(run_id)).status == "waiting" and (await store.get_run(run_id)).steps == 1
    assert not await store.resumable(run_id)
    assert run_id not in await store.runs_to_resume(stale_seconds=0)
    assert await store.run_of_call(key) == run_id

    async with store.engine.begin() as conn:
        await repository.update_tool_call(conn, key, status="finished")
    assert await store.resumable(run_id)
    assert run_id in await store.runs_to_resume(stale_seconds=3600)

    result = ToolResult(call_id, {"status": "succeeded", "result": {"order_id": "O-1"}})
    await store.record_results(run_id, [result], waiting=False)
    await store.record_results(run_id, [result], waiting=False)  # a second driver's copy is not stored
    await store.record_reply(run_id, assistant_message("Order O-1 placed."))

    snapshot = await store.load(run_id)
    assert [item.entry["role"] for item in snapshot.history] == ["user", "assistant", "tool", "assistant"]
    assert snapshot.run.status == "finished" and snapshot.run.steps == 2
    assert [t for _, t in await events(store, session_id)] == [
        "message", "run_started", "message", "message", "run_finished"]
    second, created = await store.start_run(session_id=session_id, owner="alice", message_id="m2", text="hello")
    assert created


async def test_refused_calls_get_their_start_and_finish_events(store):
    session_id = await new_session(store)
    run_id, _ = await store.start_run(session_id=session_id, owner="alice", message_id="m", text="x")
    call_id = f"{run_id}:bad"
    await store.record_reply(run_id, assistant_message(None, [{"id": call_id, "name": "nope", "arguments": {}}]))
    content = {"status": "failed", "error": {"code": "unknown_tool", "message": "unknown tool 'nope'"}}
    await store.record_results(run_id, [ToolResult(call_id, content, rejected=("nope", {}))], waiting=False)

    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(session_events.c.type, session_events.c.data)
                                   .where(session_events.c.session_id == session_id)
                                   .order_by(session_events.c.seq))).all()
    assert [(r.type, r.data) for r in rows[-2:]] == [
        ("tool_started", {"call_id": call_id, "tool": "nope", "arguments": {}}),
        ("tool_finished", {"call_id": call_id, "outcome": "failed",
                           "error": {"code": "unknown_tool", "message": "unknown tool 'nope'"}}),
    ]


async def test_a_running_run_is_resumed_only_once_it_is_stale(store):
    session_id = await new_session(store)
    run_id, _ = await store.start_run(session_id=session_id, owner="alice", message_id="m", text="x")
    assert run_id not in await store.runs_to_resume(stale_seconds=3600)
    assert run_id in await store.runs_to_resume(stale_seconds=0)


async def set_updated_at(store: SqlRunStore, run_id: str, seconds_ago: float) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from erpilot_agent.adapters.tables import runs

    async with store.engine.begin() as conn:
        await conn.execute(update(runs).where(runs.c.run_id == run_id).values(
            updated_at=repository.now() - timedelta(seconds=seconds_ago)))


async def test_failed_attempts_are_counted_backed_off_and_reset_by_progress(store):
    session_id = await new_session(store)
    run_id, _ = await store.start_run(session_id=session_id, owner="alice", message_id="m", text="x")

    first = await store.note_failure(run_id)
    second = await store.note_failure(run_id)
    third = await store.note_failure(run_id)
    assert [first[0], second[0], third[0]] == [1, 2, 3]
    assert 0 <= first[1] <= second[1] <= third[1] < 60  # seconds since the first failure

    # after 3 failures the next attempt waits stale * 2^2 = 4 s (stale 1 s)
    await set_updated_at(store, run_id, 2)
    assert run_id not in await store.runs_to_resume(stale_seconds=1)
    await set_updated_at(store, run_id, 5)
    assert run_id in await store.runs_to_resume(stale_seconds=1)
    await set_updated_at(store, run_id, 61)  # and never more than a minute, however many failures
    for _ in range(20):
        await store.note_failure(run_id)
    await set_updated_at(store, run_id, 61)
    assert run_id in await store.runs_to_resume(stale_seconds=1)

    await store.record_reply(run_id, assistant_message(None, [{"id": f"{run_id}:a", "name": "get_product",
                                                               "arguments": {"sku": "S"}}]))
    assert (await store.note_failure(run_id))[0] == 1  # a stored reply started the count again

    await store.fail(run_id, "retries_exhausted", "gave up")
    assert await store.note_failure(run_id) == (0, 0.0)  # an ended run counts nothing

async def _waiting_run(store: SqlRunStore, session_id: str, message_id: str = "m") -> tuple[str, str]:
    run_id, _ = await store.start_run(session_id=session_id, owner="alice", message_id=message_id, text="submit")
    call_id = f"{run_id}:w"
    await store.record_reply(run_id, assistant_message(None, [
        {"id": call_id, "name": "submit_order", "arguments": {"draft_id": "D-1", "revision": 1}}]))
    async with store.engine.begin() as conn:
        await repository.insert_tool_call(
            conn, call_key=call_key(session_id, call_id), call_id=call_id, session_id=session_id, run_id=run_id,
            source="model", tool="submit_order", request_hash="sha256:x", arguments={},
            operation_id=f"op_{uuid.uuid4().hex}", status="awaiting_approval", lifecycle={})
        await repository.update_tool_call(conn, call_key(session_id, call_id), pending_id=f"pa_{run_id}")
    await store.record_results(run_id, [], waiting=True)
    return run_id, call_id


async def test_a_waiting_run_does_not_block_a_new_one_but_a_working_run_does(store):
    session_id = await new_session(store)
    waiting, _ = await _waiting_run(store, session_id)

    beside, created = await store.start_run(session_id=session_id, owner="alice", message_id="m2", text="hello")

    assert created and beside != waiting
    assert (await store.get_run(waiting)).status == "waiting"
    assert await rejected_code(store.start_run(session_id=session_id, owner="alice", message_id="m3",
                                               text="and more")) == "run_in_progress"  # m2 is working


async def test_cancel_ends_a_waiting_run_once_and_names_its_pending_approvals(store):
    session_id = await new_session(store)
    run_id, _ = await _waiting_run(store, session_id)
    cancel = store.cancel

    assert await rejected_code(cancel(session_id=session_id, owner="mallory", run_id=run_id)) == "not_found"
    assert await rejected_code(cancel(session_id="ses_other", owner="alice", run_id=run_id)) == "not_found"
    assert await cancel(session_id=session_id, owner="alice", run_id=run_id) == [f"pa_{run_id}"]
    assert await cancel(session_id=session_id, owner="alice", run_id=run_id) == [f"pa_{run_id}"]  # idempotent

    assert (await store.get_run(run_id)).status == "cancelled"
    assert [t for _, t in await events(store, session_id)].count("run_failed") == 1
    assert run_id not in await store.runs_to_resume(stale_seconds=0)
    await store.record_reply(run_id, assistant_message("too late"))  # a driver that was mid-step records nothing
    assert (await store.get_run(run_id)).status == "cancelled"
    working, _ = await store.start_run(session_id=session_id, owner="alice", message_id="m2", text="next")
    assert await rejected_code(cancel(session_id=session_id, owner="alice", run_id=working)) == "run_in_progress"
    await store.finish(working)
    assert await rejected_code(cancel(session_id=session_id, owner="alice", run_id=working)) == "run_not_waiting"


async def test_cancel_records_the_withdrawal_for_the_approval_service_in_its_own_transaction(store):
    session_id = await new_session(store)
    run_id, call_id = await _waiting_run(store, session_id)

    await store.cancel(session_id=session_id, owner="alice", run_id=run_id)
    await store.cancel(session_id=session_id, owner="alice", run_id=run_id)  # a repeat records nothing more

    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(outbox.c.msg_id, outbox.c.payload).where(
            outbox.c.subject == subjects.AGENT_EVT_RUN_CANCELLED,
            outbox.c.msg_id == f"run_cancelled:{run_id}"))).all()
    [(_, payload)] = rows
    event = RunCancelledV1.model_validate(payload)
    assert (event.session_id, event.run_id, event.owner, event.call_ids) == (session_id, run_id, "alice", [call_id])


async def test_a_refused_cancel_records_no_withdrawal(store):
    session_id = await new_session(store)
    run_id, _ = await _waiting_run(store, session_id)

    await rejected_code(store.cancel(session_id=session_id, owner="mallory", run_id=run_id))

    async with store.engine.connect() as conn:
        found = await conn.scalar(select(outbox.c.msg_id).where(outbox.c.msg_id == f"run_cancelled:{run_id}"))
    assert found is None and (await store.get_run(run_id)).status == "waiting"
