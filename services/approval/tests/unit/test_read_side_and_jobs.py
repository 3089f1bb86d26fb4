"""The read side and the background jobs on the memory unit of work: the queries (filters, newest first,
cursor), the audit rows and checkpoints, the pending gauge, the sweepers' "when next", the expiry warnings,
and webhook deliveries from event to receiver (an ``httpx.MockTransport`` plays the receiver)."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timedelta

import httpx
import pytest

from erpilot_approval.domain.audit import AuditRow, verify
from erpilot_approval.domain.policy import load_policy
from erpilot_approval.domain.webhooks import Webhook
from erpilot_approval.service_layer.audit import CheckpointSigner
from erpilot_approval.service_layer.audit_queries import audit_chain, audit_rows, record_operation_finished
from erpilot_approval.service_layer.expiry import expiry_sweeper
from erpilot_approval.service_layer.expiry_warnings import WarningSweeper
from erpilot_approval.service_layer.gauges import refresh_pending_gauge
from erpilot_approval.service_layer.queries import get_approval, list_approvals, referring_approval
from erpilot_approval.service_layer.sweeper import EPSILON_SECONDS, LISTENING_POLL_SECONDS
from erpilot_approval.service_layer.webhook_dispatch import WebhookDispatcher
from erpilot_approval.service_layer.webhook_events import WebhookEvents
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import (
    Actor,
    ApprovalExpiringV1,
    ApprovalResolvedV1,
    AuditChainQueryV1,
    AuditQueryV1,
    FindReferringApprovalV1,
    GetApprovalV1,
    ListApprovalsV1,
)
from erpilot_contracts.erp.v1 import OperationStatusV1
from erpilot_platform import cursors
from erpilot_platform.loops import Soon
from erpilot_platform.telemetry import pending_approvals

from ..fakes import NOW
from .conftest import Desk, refusal_of

pytestmark = pytest.mark.unit

BOB = Actor(sub="bob", roles=["approver"])
ADMIN = Actor(sub="root", roles=["admin"])
HOOK = Webhook(url="https://hooks.example/a", events=("approval.requested", "approval.resolved",
                                                      "approval.expiring", "operation.finished"),
               secret="0123456789abcdef")


async def three_requests(desk: Desk) -> list[dict]:
    """Three pending approvals a second apart: two of session s-1 (one a cancellation), one of s-2."""
    records = []
    for tool, session in (("submit_order", "s-1"), ("cancel_order", "s-1"), ("submit_order", "s-2")):
        records.append(await desk.request(tool, session_id=session))
        desk.uow.advance(timedelta(seconds=1))
    return records


# --- queries ---------------------------------------------------------------------------------------------

async def test_the_list_is_newest_first_filtered_and_paged_by_cursor(desk):
    first, second, third = await three_requests(desk)

    page = await list_approvals(ListApprovalsV1(actor=BOB, limit=2), desk.ports)
    assert [i.pending_id for i in page.items] == [third["pending_id"], second["pending_id"]]
    rest = await list_approvals(ListApprovalsV1(actor=BOB, limit=2, cursor=page.next_cursor), desk.ports)
    assert [i.pending_id for i in rest.items] == [first["pending_id"]]
    assert rest.next_cursor is None

    by_session = await list_approvals(ListApprovalsV1(actor=BOB, session_id="s-1", tool="submit_order"), desk.ports)
    assert [i.pending_id for i in by_session.items] == [first["pending_id"]]
    since = await list_approvals(ListApprovalsV1(actor=BOB, since=NOW + timedelta(seconds=1)), desk.ports)
    assert [i.pending_id for i in since.items] == [third["pending_id"], second["pending_id"]]
    nobody = await list_approvals(ListApprovalsV1(actor=Actor(sub="eve", roles=["requester"])), desk.ports)
    assert nobody.items == []


async def test_the_list_takes_a_status_and_refuses_a_bad_cursor(desk):
    first, _, _ = await three_requests(desk)
    assert (await desk.decide(first, "reject", "bob", "approver")).status == "rejected"

    rejected = await list_approvals(ListApprovalsV1(actor=BOB, status="rejected"), desk.ports)
    assert [i.pending_id for i in rejected.items] == [first["pending_id"]]
    bad = await refusal_of(list_approvals(ListApprovalsV1(actor=BOB, cursor="not-a-cursor"), desk.ports))
    assert (bad.code, bad.status) == ("invalid_cursor", 422)
    beyond = cursors.encode(datetime.fromisoformat("0001-01-01T00:00:00+01:00"), "pa_x")  # no UTC for it
    bad_time = await refusal_of(list_approvals(ListApprovalsV1(actor=BOB, cursor=beyond), desk.ports))
    assert (bad_time.code, bad_time.status) == ("invalid_datetime", 422)


async def test_one_approval_is_shown_to_its_deciders_and_requester_only(desk):
    record = await desk.request("submit_order")

    shown = await get_approval(GetApprovalV1(pending_id=record["pending_id"], actor=BOB), desk.ports)
    assert shown.pending_id == record["pending_id"] and shown.can_decide is True
    mine = await get_approval(GetApprovalV1(pending_id=record["pending_id"],
                                            actor=Actor(sub="alice", roles=["requester"])), desk.ports)
    assert mine.pending_id == record["pending_id"] and mine.can_decide is False
    other = await refusal_of(get_approval(GetApprovalV1(pending_id=record["pending_id"],
                                                        actor=Actor(sub="eve", roles=["requester"])), desk.ports))
    unknown = await refusal_of(get_approval(GetApprovalV1(pending_id="pa-nope", actor=BOB), desk.ports))
    assert (other.code, other.status, other.message.replace(record["pending_id"], "?")) == (
        unknown.code, unknown.status, unknown.message.replace("pa-nope", "?")) == (
        "not_found", 404, "approval ? not found")  # "not yours" looks like "unknown" (SPEC §5)


async def test_an_approval_naming_a_draft_or_an_order_is_found_only_for_those_who_may_decide_it(desk):
    """What lets an approver read the draft or order an approval refers to (SPEC §10); the requester is a party
    under separation of duties, yet may still decide (reject), so an approver-requester finds it too."""
    submit = await desk.request("submit_order")  # names draft D-1 (approver or manager)
    desk.uow.advance(timedelta(seconds=1))
    refund = await desk.request("refund_payment")  # names order O-1 (manager)
    await desk.request("adjust_stock")  # names neither

    async def found(actor: Actor, drafts: list[str] = (), orders: list[str] = ()) -> str | None:
        query = FindReferringApprovalV1(actor=actor, draft_ids=list(drafts), order_ids=list(orders))
        return (await referring_approval(query, desk.ports)).pending_id

    assert await found(BOB, drafts=["D-1"]) == submit["pending_id"]
    assert await found(BOB, orders=["O-1"]) is None  # the refund is a manager's
    assert await found(Actor(sub="mia", roles=["manager"]), orders=["O-1"]) == refund["pending_id"]
    assert await found(Actor(sub="mia", roles=["manager"]), drafts=["D-1"]) == submit["pending_id"]
    assert await found(Actor(sub="mia", roles=["manager"]), drafts=["D-1"], orders=["O-1"]) == refund["pending_id"]
    assert await found(Actor(sub="alice", roles=["requester", "approver"]), drafts=["D-1"]) == submit["pending_id"]
    assert await found(Actor(sub="eve", roles=["requester"]), drafts=["D-1"], orders=["O-1"]) is None
    assert await found(BOB, drafts=["D-2"]) is None and await found(BOB) is None

    # Decided, it still counts (which statuses do: the repository cases).
    assert (await desk.decide(submit, "reject", "bob", "approver")).status == "rejected"
    assert await found(Actor(sub="carl", roles=["approver"]), drafts=["D-1"]) == submit["pending_id"]


# --- audit -----------------------------------------------------------------------------------------------

async def test_the_audit_rows_of_an_approval_verify_and_are_for_admins(desk):
    record = await desk.request("submit_order")
    await desk.request("cancel_order")
    assert (await desk.decide(record, "approve", "bob", "approver")).status == "approved"
    status = OperationStatusV1(operation_id=record["operation_id"], tool="submit_order", session_id="sess-1",
                               status="committed", committed_at=NOW)
    await record_operation_finished(status, desk.uow)
    await record_operation_finished(status, desk.uow)  # a redelivery records nothing more

    page = await audit_rows(AuditQueryV1(actor=ADMIN, pending_id=record["pending_id"]), desk.ports)
    assert [row.kind for row in page.items] == [
        "request", "vote", "decision", "grant_issued", "commit_outcome", "grant_consumed"]
    by_operation = await audit_rows(AuditQueryV1(actor=ADMIN, operation_id=record["operation_id"], limit=2),
                                    desk.ports)
    assert [row.kind for row in by_operation.items] == ["request", "vote"]
    assert (await refusal_of(audit_rows(AuditQueryV1(actor=BOB, pending_id=record["pending_id"]), desk.ports))
            ).status == 403
    assert (await refusal_of(audit_rows(AuditQueryV1(actor=ADMIN), desk.ports))).status == 422

    signer = CheckpointSigner(desk.uow, 60)
    mark = await signer.sign_once()
    assert mark is not None and mark.seq == len(desk.state.audit)
    assert await signer.sign_once() is None  # the head is signed already
    assert verify(desk.state.audit, desk.uow.key.public_key(), desk.state.checkpoints) == (
        None, len(desk.state.audit))



async def test_the_audit_chain_goes_out_page_by_page_with_its_checkpoints_once(desk):
    record = await desk.request("submit_order")
    await desk.request("cancel_order")
    assert (await desk.decide(record, "approve", "bob", "approver")).status == "approved"
    mark = await CheckpointSigner(desk.uow, 60).sign_once()
    assert mark is not None
    rows = len(desk.state.audit)

    pages, after_seq, first = [], 0, True
    while after_seq is not None:
        page = await audit_chain(AuditChainQueryV1(after_seq=after_seq, limit=2, with_checkpoints=first), desk.ports)
        pages.append(page)
        after_seq, first = page.next_after_seq, False
    assert [len(page.items) for page in pages] == [2] * (rows // 2) + ([rows % 2] if rows % 2 else [0])
    assert [row.seq for page in pages for row in page.items] == list(range(1, rows + 1))
    assert [(c.seq, c.hash) for c in pages[0].checkpoints] == [(mark.seq, mark.hash)]
    assert all(page.checkpoints == [] for page in pages[1:])  # asked once
    shown = [AuditRow(**row.model_dump(exclude={"schema_version"})) for page in pages for row in page.items]
    assert verify(shown, desk.uow.key.public_key(), desk.state.checkpoints) == (None, rows)


# --- gauge and sweepers ----------------------------------------------------------------------------------

async def test_the_gauge_counts_pending_approvals(desk, monkeypatch):
    first, _, _ = await three_requests(desk)
    assert (await desk.decide(first, "reject", "bob", "approver")).status == "rejected"
    counted = asyncio.Event()
    real_set = pending_approvals.set

    def set_and_tell(value: float) -> None:
        real_set(value)
        counted.set()

    monkeypatch.setattr(pending_approvals, "set", set_and_tell)
    task = asyncio.create_task(refresh_pending_gauge(desk.uow, every_seconds=60))
    try:
        await counted.wait()  # the first count runs at once
    finally:
        task.cancel()
    assert pending_approvals.value == 2


async def test_the_expiry_sweeper_knows_the_next_deadline(desk):
    sweeper = expiry_sweeper(desk.uow)
    assert await sweeper.seconds_to_next_due() is None
    await desk.request("submit_order")

    assert await sweeper.seconds_to_next_due() == 15 * 60
    desk.uow.advance(timedelta(minutes=16))
    assert await sweeper.seconds_to_next_due() == -60  # overdue
    assert await sweeper.sweep_once() == 1
    assert await sweeper.seconds_to_next_due() is None


async def test_the_expiry_sweeper_sleeps_long_only_while_it_hears_of_every_replica_s_deadlines(desk):
    heard = False
    sweeper = expiry_sweeper(desk.uow, poll_seconds=1.0, listening=lambda: heard)
    assert await sweeper.sweep_due() == Soon(1.0)  # nothing pending, and a replica may store one unheard
    heard = True
    assert await sweeper.sweep_due() == Soon(LISTENING_POLL_SECONDS)
    await desk.request("submit_order")
    assert await sweeper.sweep_due() == Soon(LISTENING_POLL_SECONDS)  # the deadline is 15 minutes away
    desk.uow.advance(timedelta(minutes=14, seconds=59))
    assert await sweeper.sweep_due() == Soon(1.0 + EPSILON_SECONDS)


async def test_an_approval_is_warned_once_within_its_window_and_never_after_it_ended():
    desk = Desk(load_policy('[tools.submit_order]\nwarn_before = "5m"\n'))
    sweeper = WarningSweeper(desk.uow, desk.ports.policy)
    warned, decided = await desk.request("submit_order"), await desk.request("submit_order")
    assert (await desk.decide(decided, "approve", "bob", "approver")).status == "approved"

    desk.uow.advance(timedelta(minutes=9))
    assert await sweeper.sweep_once() == 0  # six minutes left: not yet
    desk.uow.advance(timedelta(minutes=1))
    assert await sweeper.sweep_once() == 1
    assert await sweeper.sweep_once() == 0  # once
    [event] = desk.events(subjects.APPROVAL_EVT_EXPIRING)
    assert event["pending_id"] == warned["pending_id"]
    assert desk.state.warnings == {warned["pending_id"]: NOW + timedelta(minutes=10)}


# --- webhooks --------------------------------------------------------------------------------------------

class Receiver:
    """The webhook endpoint: answers with ``statuses`` in turn (then 200) and keeps what it got."""

    def __init__(self, *statuses: int):
        self.statuses = list(statuses)
        self.got: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.got.append(request)
        return httpx.Response(self.statuses.pop(0) if self.statuses else 200)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


async def test_events_become_deliveries_once_and_the_dispatcher_retries_until_delivered(desk):
    record = await desk.request("submit_order")
    wakes = []
    events = WebhookEvents(desk.uow, (HOOK,), "https://erpilot.example/", wake=lambda: wakes.append(1))
    await events.on_requested(record["pending_id"])
    await events.on_requested(record["pending_id"])  # a redelivered event adds nothing
    assert [(row.event_type, row.url) for row in desk.state.webhooks] == [("approval.requested", HOOK.url)]
    assert wakes == [1]

    dispatcher = WebhookDispatcher(desk.uow, (HOOK,), retry_base_seconds=1.0)
    receiver = Receiver(503)
    async with receiver.client() as client:
        assert await dispatcher.dispatch_once(client) == 1
        [row] = desk.state.webhooks
        assert (row.status, row.attempts, row.last_error) == ("pending", 1, "HTTP 503")
        assert await dispatcher.dispatch_once(client) == 0  # not due before its backoff
        assert await desk.uow.read(lambda unit: unit.webhooks.seconds_to_next()) == 1.0
        desk.uow.advance(timedelta(seconds=1))
        assert await dispatcher.dispatch_once(client) == 1

    [row] = desk.state.webhooks
    assert (row.status, row.attempts, row.finished_at) == ("delivered", 2, NOW + timedelta(seconds=1))
    first, second = receiver.got
    assert first.content == second.content and json.loads(first.content)["type"] == "approval.requested"
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.headers["webhook-timestamp"] != second.headers["webhook-timestamp"]
    assert await dispatcher.next_wait() == dispatcher.poll_seconds  # nothing pending


async def test_a_delivery_gives_up_after_its_time_and_a_stale_warning_is_skipped(desk):
    record = await desk.request("submit_order")
    events = WebhookEvents(desk.uow, (HOOK,), "https://erpilot.example")
    await events.on_requested(record["pending_id"])
    await events.on_expiring(ApprovalExpiringV1(
        pending_id=record["pending_id"], call_id=record["call_id"], session_id=record["session_id"],
        operation_id=record["operation_id"], tool="submit_order", expires_at=NOW + timedelta(minutes=15),
        warned_at=NOW))
    assert (await desk.decide(record, "reject", "bob", "approver")).status == "rejected"  # the warning is now false
    [resolved] = desk.events(subjects.APPROVAL_EVT_RESOLVED)
    await events.on_resolved(ApprovalResolvedV1.model_validate(resolved))
    desk.uow.advance(timedelta(hours=2))

    dispatcher = WebhookDispatcher(desk.uow, (HOOK,), give_up_after=timedelta(hours=1))
    receiver = Receiver(500, 500)
    async with receiver.client() as client:
        assert await dispatcher.dispatch_once(client) == 3

    assert {row.event_type: (row.status, row.attempts) for row in desk.state.webhooks} == {
        "approval.requested": ("dead", 1), "approval.expiring": ("skipped", 0), "approval.resolved": ("dead", 1)}
    assert len(receiver.got) == 2  # the skipped warning never went out


async def test_a_delivery_to_an_endpoint_no_longer_configured_is_dead(desk):
    record = await desk.request("submit_order")
    await WebhookEvents(desk.uow, (HOOK,), "https://erpilot.example").on_requested(record["pending_id"])

    receiver = Receiver()
    async with receiver.client() as client:
        assert await WebhookDispatcher(desk.uow, ()).dispatch_once(client) == 1

    [row] = desk.state.webhooks
    assert (row.status, row.last_error) == ("dead", "the endpoint is no longer configured")
    assert receiver.got == []


class DeadLetterStream:
    """The dead-letter stream as the dispatcher sees it: what it was given, headers included."""

    def __init__(self) -> None:
        self.copies: list[tuple[bytes, str, dict[str, str]]] = []

    async def publish(self, body: bytes, *, source: str, headers: dict[str, str]) -> None:
        self.copies.append((body, source, headers))


def unreachable(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError(f"cannot connect to {request.url}", request=request)  # HTTP clients name the URL


def unavailable(request: httpx.Request) -> httpx.Response:
    return httpx.Response(503)  # httpx logs the answered request, URL and all


@pytest.mark.parametrize(("receiver", "reason"), [
    (unreachable, "ConnectError: cannot connect to https://hooks.slack.com/…#"), (unavailable, "HTTP 503")])
async def test_a_slack_style_webhook_url_is_a_secret_that_no_log_line_or_dead_letter_shows(desk, caplog, receiver,
                                                                                          reason):
    secret_path = "/services/T0001/B0002/Xx9sEcReTtOkEn"
    hook = Webhook(url=f"https://hooks.slack.com{secret_path}", events=("approval.requested",),
                   secret="0123456789abcdef")
    record = await desk.request("submit_order")
    await WebhookEvents(desk.uow, (hook,), "https://erpilot.example").on_requested(record["pending_id"])

    stream = DeadLetterStream()
    logging.getLogger("httpx").setLevel(logging.NOTSET)  # as a fresh process has it
    dispatcher = WebhookDispatcher(desk.uow, (hook,), dead_letters=stream, give_up_after=timedelta(0))
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient(transport=httpx.MockTransport(receiver)) as client:
        assert await dispatcher.dispatch_once(client) == 1

    [row] = desk.state.webhooks
    assert row.status == "dead"
    [(_, source, headers)] = stream.copies
    assert source == "webhook.approval.requested"
    assert headers["Erpilot-Webhook-Url"].startswith("https://hooks.slack.com/…#")
    assert headers["Erpilot-Reason"].startswith(reason)
    gave_up = [r.getMessage() for r in caplog.records if "gave up" in r.getMessage()]
    assert gave_up and "hooks.slack.com/…#" in gave_up[0]
    shown = [*headers.values(), *(r.getMessage() for r in caplog.records)]
    assert not [line for line in shown if "Xx9sEcReTtOkEn" in line or secret_path in line]
