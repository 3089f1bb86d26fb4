"""The same cases for every implementation of the agent's ``Work`` and ``DriverLocks`` (``service_layer.ports``):
the memory ones (``memory_agent.py``, tests/unit/test_repositories.py) and the SQL ones (``adapters.sql_work``,
``adapters.driver_locks``, tests/integration/test_repositories.py). Each test module imports these and gives a
``repos`` fixture.

Ids are fresh per test, so the SQL cases share one database with everything else.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from erpilot_agent.domain.call_identity import call_key
from erpilot_agent.domain.run_state import Run
from erpilot_agent.domain.tool_calls import PendingApproval, SessionEvent, ToolCall
from erpilot_agent.service_layer.ports import AgentUnitOfWork, DriverLocks, Work
from erpilot_platform.uow import ReadOnly

EXPIRES = datetime(2026, 3, 2, 9, 15, tzinfo=UTC)


@dataclass
class Backend:
    uow: AgentUnitOfWork
    outbox: Callable[[str], Awaitable[list[tuple[str, dict[str, Any]]]]]  # a session's rows: (msg_id, payload)
    tick: Callable[[], None]  # let the clock move on before the next unit of work
    locks: DriverLocks


def fresh(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


async def new_session(repos: Backend, owner: str = "alice", title: str | None = None) -> str:
    session_id = fresh("ses")
    await repos.uow.run(lambda unit: unit.sessions.add(session_id, owner, title))
    return session_id


def write_call(call_id: str, state: str = "preparing") -> ToolCall:
    call = ToolCall(call_id, "adjust_stock", {"sku": "SKU-PEN-BLUE", "delta": -1, "reason": "r"})
    call.start()
    if state in ("awaiting_approval", "executing", "finished"):
        call.await_approval(PendingApproval(f"pa_{call_id}", "fp", EXPIRES, {"operation": "x"}, "url"))
    if state in ("executing", "finished"):
        call.resolve(f"pa_{call_id}", "approved", decided_by="mgr")
    if state == "finished":
        call.finish("succeeded", result={"on_hand": 1})
    return call


async def add_call(repos: Backend, session_id: str, call: ToolCall, *, run_id: str | None = None,
                   assertion: str | None = "as-1"):
    async def work(unit: Work):
        return await unit.calls.add(call_key=call_key(session_id, call.call_id), call_id=call.call_id,
                                    session_id=session_id, run_id=run_id, source="model" if run_id else "external",
                                    request_hash="v1:sha256:x", operation_id=fresh("op"), assertion=assertion,
                                    call=call)

    return await repos.uow.run(work)


async def add_run(repos: Backend, session_id: str, status: str = "running", **fields: Any) -> Run:
    run = Run(run_id=fresh("run"), session_id=session_id, owner="?", status=status,
              message_id=fields.pop("message_id", fresh("msg")), **fields)
    await repos.uow.run(lambda unit: unit.runs.add(run))
    repos.tick()
    return run


def look(repos: Backend, work: Callable[[Work], Awaitable[Any]]) -> Awaitable[Any]:
    return repos.uow.read(work)


# --- sessions and their events --------------------------------------------------------------------------
async def test_a_session_is_read_back_and_listed_by_its_owner_newest_first(repos: Backend):
    owner = fresh("owner")
    first = await new_session(repos, owner, "Paper for Acme")
    repos.tick()
    second = await new_session(repos, owner, "pens")
    repos.tick()
    third = await new_session(repos, owner, None)

    session = await look(repos, lambda unit: unit.sessions.get(first))
    assert (session.owner, session.title, session.last_seq, session.active_run_id) == (owner, "Paper for Acme", 0,
                                                                                       None)
    assert await look(repos, lambda unit: unit.sessions.get(fresh("ses"))) is None
    newest = await look(repos, lambda unit: unit.sessions.owned_by(owner, q=None, before=None, limit=2))
    assert [s.session_id for s in newest] == [third, second]
    older = await look(repos, lambda unit: unit.sessions.owned_by(
        owner, q=None, before=(newest[-1].created_at, newest[-1].session_id), limit=10))
    assert [s.session_id for s in older] == [first]
    assert [s.session_id for s in await look(repos, lambda unit: unit.sessions.owned_by(
        owner, q="ACME", before=None, limit=10))] == [first]


async def test_events_are_numbered_gap_free_each_with_its_outbox_row(repos: Backend):
    session_id = await new_session(repos)
    call = write_call("c-1")
    await add_call(repos, session_id, call)
    await repos.uow.run(lambda unit: unit.sessions.append(session_id, [
        SessionEvent("tool_started", {"call_id": "c-1"}), SessionEvent("message", {"role": "user", "text": "hi"})]))

    async def move_on(unit: Work) -> None:  # a transition: the call and its events in one statement (SQL)
        record = await unit.calls.get(call_key(session_id, "c-1"), lock=True)
        events = record.call.await_approval(PendingApproval("pa_1", "fp", EXPIRES, {}, "url"))
        await unit.calls.save(record.call_key, record.call, events=events)
        await unit.sessions.append(session_id, [SessionEvent("approval_expiring", {"call_id": "c-1",
                                                                                 "pending_id": "pa_1"})])

    await repos.uow.run(move_on)

    events = await look(repos, lambda unit: unit.sessions.events(session_id))
    assert [(e.seq, e.type) for e in events] == [(1, "tool_started"), (2, "message"), (3, "approval_pending"),
                                                 (4, "approval_expiring")]
    assert (await look(repos, lambda unit: unit.sessions.get(session_id))).last_seq == 4
    rows = await repos.outbox(session_id)
    assert [msg_id for msg_id, _ in rows] == [f"session:{session_id}:{seq}" for seq in range(1, 5)]
    assert [(p["seq"], p["type"], p["session_id"]) for _, p in rows] == [
        (e.seq, e.type, session_id) for e in events]
    assert await look(repos, lambda unit: unit.sessions.shows(session_id, "approval_expiring", pending_id="pa_1"))
    assert not await look(repos, lambda unit: unit.sessions.shows(session_id, "approval_expiring", pending_id="pa_2"))


async def test_a_unit_of_work_that_raises_leaves_nothing(repos: Backend):
    session_id = await new_session(repos)

    async def fails(unit: Work) -> None:
        await unit.sessions.append(session_id, [SessionEvent("message", {"role": "user", "text": "lost"})])
        await unit.runs.add(Run(fresh("run"), session_id, "alice", "running", message_id="m"))
        raise RuntimeError("refused after writing")

    with pytest.raises(RuntimeError):
        await repos.uow.run(fails)

    assert await look(repos, lambda unit: unit.sessions.events(session_id)) == []
    assert await look(repos, lambda unit: unit.runs.of_session(session_id)) == []
    assert await repos.outbox(session_id) == []


async def test_a_read_locks_and_writes_nothing(repos: Backend):
    session_id = await new_session(repos)
    await add_call(repos, session_id, write_call("c-1"))

    for write in (lambda unit: unit.calls.get(call_key(session_id, "c-1"), lock=True),
                  lambda unit: unit.sessions.get(session_id, lock=True),
                  lambda unit: unit.sessions.append(session_id, [SessionEvent("message", {"role": "user",
                                                                                          "text": "x"})]),
                  lambda unit: unit.emit("erpilot.v1.evt.agent.test", {"x": 1})):
        with pytest.raises(ReadOnly):
            await look(repos, write)


# --- calls ---------------------------------------------------------------------------------------------
async def test_a_call_is_recorded_once_and_read_back_as_stored(repos: Backend):
    session_id = await new_session(repos)
    run = await add_run(repos, session_id)

    added = await add_call(repos, session_id, write_call("c-1", "awaiting_approval"), run_id=run.run_id)
    again = await add_call(repos, session_id, write_call("c-1"), run_id=run.run_id)  # a concurrent delivery's

    assert again is None
    record = await look(repos, lambda unit: unit.calls.get(call_key(session_id, "c-1")))
    assert (record.call_id, record.session_id, record.run_id, record.source) == ("c-1", session_id, run.run_id,
                                                                                 "model")
    assert (record.operation_id, record.assertion, record.request_hash) == (added.operation_id, "as-1",
                                                                            "v1:sha256:x")
    assert record.call == write_call("c-1", "awaiting_approval")  # state, pending, lifecycle: all of it
    assert record.created_at is not None and record.updated_at is not None


async def test_a_saved_call_keeps_its_new_state_arguments_and_operation(repos: Backend):
    session_id = await new_session(repos)
    await add_call(repos, session_id, write_call("c-1", "awaiting_approval"))
    key = call_key(session_id, "c-1")

    async def edit(unit: Work) -> None:
        record = await unit.calls.get(key, lock=True)
        events = record.call.supersede("pa_c-1", PendingApproval("pa_2", "fp2", EXPIRES, {}, "url2", "mgr"),
                                       decided_by="mgr")
        record.call.arguments = {**record.call.arguments, "delta": -2}
        await unit.calls.save(key, record.call, events=events, operation_id="op_edited")

    await repos.uow.run(edit)

    record = await look(repos, lambda unit: unit.calls.get(key))
    assert (record.operation_id, record.call.arguments["delta"], record.call.pending.pending_id) == (
        "op_edited", -2, "pa_2")
    assert record.call.resolutions == {"pa_c-1": "superseded"} and record.call.pending.edited_by == "mgr"
    assert [e.type for e in await look(repos, lambda unit: unit.sessions.events(session_id))] == [
        "approval_resolved", "approval_pending"]


async def test_a_sessions_calls_are_found_by_id_in_order_and_by_what_waits_in_a_run(repos: Backend):
    session_id, other = await new_session(repos), await new_session(repos)
    run = await add_run(repos, session_id, "waiting")
    await add_call(repos, session_id, write_call("c-1", "awaiting_approval"), run_id=run.run_id)
    repos.tick()
    await add_call(repos, session_id, write_call("c-2", "finished"), run_id=run.run_id)
    repos.tick()
    await add_call(repos, session_id, write_call("c-3", "preparing"), run_id=run.run_id)
    await add_call(repos, session_id, write_call("c-4", "executing"), run_id=run.run_id)
    await add_call(repos, other, write_call("c-1", "awaiting_approval"))

    in_session = await look(repos, lambda unit: unit.calls.in_session(session_id))
    chosen = await look(repos, lambda unit: unit.calls.of_session(session_id, ["c-2", "c-9"]))
    undecided = await look(repos, lambda unit: unit.calls.undecided_in_run(session_id, run.run_id))

    assert [r.call_id for r in in_session] == ["c-1", "c-2", "c-3", "c-4"]
    assert [(r.call_id, r.session_id) for r in chosen] == [("c-2", session_id)]
    assert [r.call_id for r in undecided] == ["c-1", "c-3"]  # no decision yet; c-4 was approved
    assert await look(repos, lambda unit: unit.calls.of_session(session_id, [])) == []


async def test_the_external_calls_left_not_driven_are_found_once_untouched_long_enough(repos: Backend):
    session_id = await new_session(repos)
    run = await add_run(repos, session_id, "waiting")
    drafting = ToolCall("c-2", "create_order_draft", {"customer_id": "C-1", "lines": []})
    drafting.start(needs_approval=False)  # a draft still running at the ERP
    await add_call(repos, session_id, write_call("c-1", "preparing"))
    repos.tick()
    await add_call(repos, session_id, drafting)
    await add_call(repos, session_id, write_call("c-3", "awaiting_approval"))
    await add_call(repos, session_id, write_call("c-4", "finished"))
    await add_call(repos, session_id, write_call("c-5", "preparing"), run_id=run.run_id)  # the run resumer's

    def mine(records) -> list[str]:
        return [r.call_id for r in records if r.session_id == session_id]

    assert mine(await look(repos, lambda w: w.calls.left_by_their_request())) == ["c-1", "c-2"]
    assert mine(await look(repos, lambda w: w.calls.left_by_their_request(untouched_for_seconds=3600))) == []


# --- runs and history ----------------------------------------------------------------------------------
async def test_a_run_is_stored_with_its_sessions_owner_and_its_message(repos: Backend):
    session_id = await new_session(repos, "bob")
    run = await add_run(repos, session_id, assertion="as-run", message_id="m-1")

    stored = await look(repos, lambda unit: unit.runs.get(run.run_id))
    assert (stored.session_id, stored.owner, stored.status, stored.assertion, stored.steps) == (
        session_id, "bob", "running", "as-run", 0)
    assert (await look(repos, lambda unit: unit.runs.by_message(session_id, "m-1"))).run_id == run.run_id
    assert await look(repos, lambda unit: unit.runs.by_message(session_id, "m-2")) is None
    assert await look(repos, lambda unit: unit.runs.get(fresh("run"))) is None


async def test_a_saved_run_keeps_its_status_steps_error_and_failed_attempts(repos: Backend):
    session_id = await new_session(repos)
    run = await add_run(repos, session_id)
    since = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    changed = replace(await look(repos, lambda unit: unit.runs.get(run.run_id)), status="failed", steps=3,
                      error={"code": "max_steps", "message": "m"}, failed_attempts=2, failing_since=since,
                      updated_at=since + timedelta(minutes=1))

    await repos.uow.run(lambda unit: unit.runs.save(changed))

    stored = await look(repos, lambda unit: unit.runs.get(run.run_id))
    assert (stored.status, stored.steps, stored.error, stored.failed_attempts) == (
        "failed", 3, {"code": "max_steps", "message": "m"}, 2)
    assert (stored.failing_since, stored.updated_at) == (since, since + timedelta(minutes=1))


async def test_the_working_run_and_the_runs_of_a_session(repos: Backend):
    session_id = await new_session(repos)
    finished = await add_run(repos, session_id, "finished")
    waiting = await add_run(repos, session_id, "waiting")
    assert await look(repos, lambda unit: unit.runs.working(session_id)) is None  # a waiting run blocks nothing
    working = await add_run(repos, session_id, "running")

    assert (await look(repos, lambda unit: unit.runs.working(session_id))).run_id == working.run_id
    assert [r.run_id for r in await look(repos, lambda unit: unit.runs.of_session(session_id))] == [
        finished.run_id, waiting.run_id, working.run_id]
    assert await look(repos, lambda unit: unit.runs.any_running())


async def test_history_is_appended_in_order_across_runs(repos: Backend):
    session_id = await new_session(repos)
    first, second = await add_run(repos, session_id, "finished"), await add_run(repos, session_id)

    await repos.uow.run(lambda unit: unit.runs.append_history(session_id, first.run_id, [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]))
    await repos.uow.run(lambda unit: unit.runs.append_history(session_id, second.run_id, [{"role": "user",
                                                                                       "content": "c"}]))
    await repos.uow.run(lambda unit: unit.runs.append_history(session_id, second.run_id, []))

    history = await look(repos, lambda unit: unit.runs.history(session_id))
    assert [(item.run_id, item.entry["content"]) for item in history] == [
        (first.run_id, "a"), (first.run_id, "b"), (second.run_id, "c")]


@pytest.mark.parametrize("state, resumable", [("preparing", False), ("awaiting_approval", False),
                                              ("executing", False), ("finished", True)])
async def test_a_waiting_run_is_resumable_once_no_call_of_it_still_blocks(repos: Backend, state, resumable):
    session_id = await new_session(repos)
    run = await add_run(repos, session_id, "waiting")
    await add_call(repos, session_id, write_call("c-1", state), run_id=run.run_id)

    assert await look(repos, lambda unit: unit.runs.resumable(run.run_id)) is resumable
    due = await look(repos, lambda unit: unit.runs.due(now=datetime.now(UTC) + timedelta(days=1), stale_seconds=1,
                                                   max_delay_seconds=60))
    assert (run.run_id in due) is resumable


async def test_a_run_is_due_once_stale_and_after_failures_only_after_its_back_off(repos: Backend):
    session_id = await new_session(repos)
    base = datetime.now(UTC) - timedelta(days=1)
    run = await add_run(repos, session_id, "running")
    stored = await look(repos, lambda unit: unit.runs.get(run.run_id))
    await repos.uow.run(lambda unit: unit.runs.save(replace(stored, updated_at=base)))

    async def due_at(seconds: float) -> bool:
        return run.run_id in await look(repos, lambda unit: unit.runs.due(
            now=base + timedelta(seconds=seconds), stale_seconds=5, max_delay_seconds=60))

    assert not await due_at(4) and await due_at(6)  # running, unchanged for 5 s: a crash left it
    await repos.uow.run(lambda unit: unit.runs.save(replace(stored, failed_attempts=3, failing_since=base,
                                                        updated_at=base)))
    assert not await due_at(19) and await due_at(21)  # 5 s × 2^(3 − 1) after the last failure
    await repos.uow.run(lambda unit: unit.runs.save(replace(stored, failed_attempts=30, updated_at=base)))
    assert not await due_at(59) and await due_at(61)  # never more than the longest delay


async def test_the_active_run_is_named_and_cleared_only_by_its_own_run(repos: Backend):
    session_id = await new_session(repos)

    await repos.uow.run(lambda unit: unit.sessions.set_active_run(session_id, "run_a"))
    await repos.uow.run(lambda unit: unit.sessions.set_active_run(session_id, None, if_active="run_b"))
    assert (await look(repos, lambda unit: unit.sessions.get(session_id))).active_run_id == "run_a"
    await repos.uow.run(lambda unit: unit.sessions.set_active_run(session_id, None, if_active="run_a"))
    assert (await look(repos, lambda unit: unit.sessions.get(session_id))).active_run_id is None


async def test_only_one_driver_holds_a_session_until_it_lets_go_even_by_raising(repos: Backend):
    session_id, other_session = fresh("ses"), fresh("ses")
    async with repos.locks.hold(session_id) as first:
        async with repos.locks.hold(session_id) as second, repos.locks.hold(other_session) as other:
            assert (first, second, other) == (True, False, True)
    with pytest.raises(RuntimeError):
        async with repos.locks.hold(session_id) as again:
            assert again
            raise RuntimeError("the driver crashed")
    async with repos.locks.hold(session_id) as after_the_crash:
        assert after_the_crash
