"""PREPARE and COMMIT (``OperationService``) on the in-memory ledger.

Prepare stores the operation and, in the same unit of work, the approval request built from that record; only
for the requester the gateway vouched for (an edit: the requester of the version it replaces). Commit re-checks
price, stock and revision against what prepare saw, uses a grant once, repeats its outcome, refuses (as a message
that may not be acted on) every commit it cannot honour, and a crash before the database commit leaves nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import normalise
from erpilot_erp.service_layer import operations
from erpilot_platform import deliveries
from erpilot_platform.assertions import verify_assertion
from erpilot_platform.grants import sign_edit
from erpilot_platform.ledger_signatures import verify_request
from erpilot_platform.refusals import InvalidMessage, Refused

pytestmark = pytest.mark.unit
STOCK = {"sku": "SKU-A", "delta": 1, "reason": "found"}


async def submit(desk, lines=(("SKU-A", 2),), **kw):
    draft = await desk.new_draft(list(lines))
    return await desk.prepared("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, **kw)


def requests_sent(desk) -> list[dict]:
    return desk.ledger.sent_on(subjects.APPROVAL_CMD_REQUEST)


async def test_prepare_stores_the_operation_asks_for_approval_and_answers_its_preview_without_an_effect(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    cmd = desk.prepare_cmd("submit_order", {"draft_id": draft["draft_id"], "revision": 1})
    answer = await desk.operations.prepare(cmd)

    assert (answer.operation_id, answer.tool, answer.fingerprint) == (cmd.operation_id, "submit_order",
                                                                     cmd.fingerprint)
    assert answer.preview.amount_minor == 2000  # 2 x SKU-A at 1000 for C-1 (no discount)
    record = desk.state.operations[cmd.operation_id]
    assert record.status == "prepared"
    assert (record.requested_by, record.assertion, record.asserted_at, record.prepared_at) == (
        "tester", cmd.assertion, desk.ledger.clock(), desk.ledger.clock())
    assert desk.state.products["SKU-A"].on_hand == 12 and desk.state.orders == {}

    [message] = [m for m in desk.ledger.sent if m.subject == subjects.APPROVAL_CMD_REQUEST]
    assert message.msg_id == f"approval.request.{cmd.operation_id}"
    request = RequestApprovalV1.model_validate(message.payload)
    assert (request.operation_id, request.session_id, request.call_id, request.tool, request.tool_schema_version) == (
        cmd.operation_id, cmd.session_id, cmd.call_id, "submit_order", 1)
    assert (request.arguments, request.fingerprint, request.requested_by, request.assertion) == (
        cmd.arguments, cmd.fingerprint, "tester", cmd.assertion)
    assert request.asserted_at == request.prepared_at == desk.ledger.clock() and request.supersedes is None
    assert request.preview == answer.preview
    # No schema_version inside a preview (it travels on to people as the ledger wrote it).
    assert "schema_version" not in message.payload["preview"]
    assert "schema_version" not in message.payload["preview"]["effects"][0]
    # Signed with the ledger key, as it travels (the outbox's JSON): the approval service acts on nothing else.
    assert verify_request(request, desk.ledger_key.public_key())
    assert not verify_request(request, Ed25519PrivateKey.generate().public_key())


async def test_the_request_comes_from_the_ledgers_record_not_from_a_second_look(desk):
    """What the approval service is asked is what was stored: one message per operation, even if asked again."""
    cmd = await desk.prepared("adjust_stock", STOCK)
    desk.state.products["SKU-A"] = replace(desk.state.products["SKU-A"], on_hand=99)  # the ledger moves on
    await desk.operations.prepare(cmd)

    [request] = requests_sent(desk)
    assert request["preview"]["effects"][0]["before"] == 12


async def test_a_repeated_prepare_gets_the_first_answer_and_another_request_under_its_id_a_conflict(desk):
    cmd = await submit(desk)
    first = await desk.operations.prepare(cmd)
    other = desk.prepare_cmd("adjust_stock", STOCK, operation_id=cmd.operation_id)

    assert await desk.operations.prepare(cmd) == first
    with pytest.raises(Refused) as conflict:
        await desk.operations.prepare(other)
    assert conflict.value.code == "operation_conflict"
    assert desk.state.operations[cmd.operation_id].tool == "submit_order"
    assert len(requests_sent(desk)) == 1


async def test_prepare_refuses_a_fingerprint_that_does_not_match(desk):
    cmd = desk.prepare_cmd("adjust_stock", STOCK)
    with pytest.raises(Refused) as refused:
        await desk.operations.prepare(cmd.model_copy(update={"fingerprint": "sha256:" + "0" * 64}))

    assert (refused.value.code, refused.value.status) == ("fingerprint_mismatch", 422)
    assert desk.state.operations == {} and requests_sent(desk) == []


async def test_a_business_rejection_stores_no_operation_asks_nothing_and_is_repeated(desk):
    cmd = desk.prepare_cmd("adjust_stock", {"sku": "SKU-A", "delta": -50, "reason": "lost"})
    with pytest.raises(Refused) as first:
        await desk.operations.prepare(cmd)
    desk.state.products["SKU-A"] = replace(desk.state.products["SKU-A"], on_hand=100)  # the cause goes away
    with pytest.raises(Refused) as again:
        await desk.operations.prepare(cmd)

    assert (first.value.code, first.value.status) == ("insufficient_stock", 409)
    assert again.value.reply() == first.value.reply()  # its agent finished the call on the first answer
    assert desk.state.operations == {} and requests_sent(desk) == []


@pytest.mark.parametrize(("change", "reason"), [
    ({"assertion": None}, "assertion_missing"),
    ({"requested_by": "victim"}, "assertion_subject_mismatch"),
    ({"session_id": "S-victim"}, "assertion_session_mismatch"),
])
async def test_a_prepare_without_an_assertion_for_its_requester_and_session_stores_and_asks_nothing(
        desk, change, reason):
    cmd = desk.prepare_cmd("adjust_stock", STOCK, **change)
    with pytest.raises(InvalidMessage) as refused:
        await desk.operations.prepare(cmd)

    assert refused.value.reason == reason
    assert desk.state.operations == {} and requests_sent(desk) == [] and desk.ledger.inbox == {}


@pytest.mark.parametrize("bound", [
    {"call_id": "call-a-read", "tool": "search_products"},
    {"call_id": "SAME", "tool": "search_products"},  # the read's own call id, given to the write
    {"run_id": "run-another"},
    # the cancel of the call's own run (security review of #32: a cancel's run id is the caller's word)
    {"run_id": "run-desk", "cancel": True},
])
async def test_the_assertion_of_another_call_prepares_nothing(desk, bound):
    """Issue #32: the person's assertion for a read (or for another run, or for a cancel) taken from the agent's
    records, reused for a write of the same person in the same session."""
    cmd = desk.prepare_cmd("adjust_stock", STOCK)
    bound = {**bound, "call_id": cmd.call_id} if bound.get("call_id") == "SAME" else bound
    cmd = cmd.model_copy(update={"assertion": desk.assertion(**bound)})
    with pytest.raises(InvalidMessage) as refused:
        await desk.operations.prepare(cmd)

    assert refused.value.reason == "assertion_call_mismatch"
    assert desk.state.operations == {} and requests_sent(desk) == [] and desk.ledger.inbox == {}


async def test_one_calls_assertion_prepares_one_write_not_more_with_other_arguments(desk):
    """Security review of #32: within a direct call's minute the agent sends more prepares of the same call with
    the same assertion, new operation ids and other arguments; only the first is prepared and asked for."""
    call_id = desk.call_id()
    one = desk.assertion(call_id=call_id, tool="adjust_stock", ttl=timedelta(seconds=60))
    first = desk.prepare_cmd("adjust_stock", STOCK, call_id=call_id, assertion=one)
    await desk.operations.prepare(first)

    for delta in (-5, -9):
        more = desk.prepare_cmd("adjust_stock", {**STOCK, "delta": delta}, call_id=call_id, assertion=one)
        with pytest.raises(InvalidMessage) as refused:
            await desk.operations.prepare(more)
        assert refused.value.reason == "call_already_prepared"

    assert list(desk.state.operations) == [first.operation_id]
    assert [r["operation_id"] for r in requests_sent(desk)] == [first.operation_id]
    again = await desk.operations.prepare(first)  # a redelivery of the one operation is still answered
    assert again.operation_id == first.operation_id and len(requests_sent(desk)) == 1


async def test_a_direct_calls_assertion_prepares_only_the_arguments_the_person_gave(desk):
    """Security review of #32: the gateway binds a direct call's assertion to the fingerprint of its normalised
    arguments (``args``); the agent's prepare of that call with other arguments is refused, nothing stored."""
    call_id = desk.call_id()
    asked = fingerprint("adjust_stock", 1, normalise("adjust_stock", STOCK))
    one = desk.assertion(call_id=call_id, tool="adjust_stock", args=asked, ttl=timedelta(seconds=60))
    other = desk.prepare_cmd("adjust_stock", {**STOCK, "delta": -9}, call_id=call_id, assertion=one)
    with pytest.raises(InvalidMessage) as refused:
        await desk.operations.prepare(other)
    assert refused.value.reason == "assertion_args_mismatch"
    assert desk.state.operations == {} and requests_sent(desk) == []

    given = desk.prepare_cmd("adjust_stock", STOCK, call_id=call_id, assertion=one)
    await desk.operations.prepare(given)
    assert list(desk.state.operations) == [given.operation_id]


class Stored:
    """A JetStream message as ``deliveries.handling`` reads it: stored at ``timestamp``."""

    def __init__(self, timestamp):
        self.metadata = type("Metadata", (), {"timestamp": timestamp})()


async def test_a_prepare_is_checked_when_jetstream_stored_it_so_a_redelivery_after_a_crash_verifies(desk):
    """A direct call's assertion lives a minute; the prepare comes back minutes later (a crashed ERP, ack waits):
    it is checked at the time the stream stored it, a time no publisher chooses."""
    call_id = desk.call_id()
    cmd = desk.prepare_cmd("adjust_stock", STOCK, call_id=call_id,
                           assertion=desk.assertion(call_id=call_id, tool="adjust_stock", ttl=timedelta(seconds=60)))
    stored = desk.ledger.clock()
    desk.ledger.advance(timedelta(minutes=5))
    with deliveries.handling(Stored(stored)):
        await desk.operations.prepare(cmd)
    assert desk.state.operations[cmd.operation_id].asserted_at == stored

    late = desk.prepare_cmd("adjust_stock", STOCK, call_id=call_id,
                            assertion=desk.assertion(call_id=call_id, tool="adjust_stock",
                                                     ttl=timedelta(seconds=60), issued=stored - timedelta(minutes=5)))
    with deliveries.handling(Stored(stored)), pytest.raises(InvalidMessage) as refused:
        await desk.operations.prepare(late)  # stored when its assertion had expired
    assert refused.value.reason == "assertion_expired"


async def test_an_expired_assertion_is_refused_at_prepare(desk):
    cmd = desk.prepare_cmd("adjust_stock", STOCK)
    desk.ledger.advance(timedelta(hours=1, minutes=1))
    with pytest.raises(InvalidMessage) as refused:
        await desk.operations.prepare(cmd)

    assert refused.value.reason == "assertion_expired" and requests_sent(desk) == []


def edit_of(desk, cmd, arguments, *, key=None, **changes):
    """The approval service's prepare of an edited version (no assertion of its own), signed with its grant key
    (``key``: another one, to forge)."""
    args = normalise(cmd.tool, arguments)
    return sign_edit(cmd.model_copy(update={
        "operation_id": f"{cmd.operation_id}-e", "arguments": args, "fingerprint": fingerprint(cmd.tool, 1, args),
        "supersedes": cmd.operation_id, "edited_by": "editor", "requested_by": "tester", "assertion": None,
        **changes}), key or desk.key)


@pytest.mark.parametrize(("forge", "reason"), [
    (lambda edit: edit.model_copy(update={"edit_signature": None}), "edit_signature_missing"),
    (lambda edit: sign_edit(edit, Ed25519PrivateKey.generate()), "edit_signature_invalid"),  # the agent's own key
    (lambda edit: edit.model_copy(update={"edited_by": "someone-else"}), "edit_signature_invalid"),  # changed
])
async def test_an_edit_is_taken_only_from_the_approval_service(desk, forge, reason):
    """Issue #32 (low): the agent may publish cmd.erp.prepare too; with ``supersedes`` it would make a new version
    of a pending write with the requester and assertion of the old one. Only the approval service's signed edit
    supersedes anything."""
    cmd = await desk.prepared("adjust_stock", STOCK)
    edit = forge(edit_of(desk, cmd, {**STOCK, "delta": -250}))
    answers = dict(desk.ledger.inbox)

    with pytest.raises(InvalidMessage) as refused:
        await desk.operations.prepare(edit)

    assert refused.value.reason == reason
    assert edit.operation_id not in desk.state.operations and len(requests_sent(desk)) == 1
    assert desk.ledger.inbox == answers  # no answer kept: the approval service's own edit may still come


async def test_an_edit_takes_requester_and_assertion_from_the_version_it_supersedes(desk):
    cmd = await desk.prepared("adjust_stock", STOCK)
    asked_at = desk.ledger.clock()
    desk.ledger.advance(timedelta(hours=3))  # long after the assertion expired: the edit needs none
    edit = edit_of(desk, cmd, {**STOCK, "delta": 2})

    answer = await desk.operations.prepare(edit)

    assert answer.operation_id == edit.operation_id
    first, second = requests_sent(desk)
    assert second["supersedes"] == cmd.operation_id and second["operation_id"] == edit.operation_id
    assert (second["requested_by"], second["assertion"]) == (first["requested_by"], first["assertion"])
    assert second["asserted_at"] == first["asserted_at"] == asked_at.isoformat().replace("+00:00", "Z")
    assert second["prepared_at"] != first["prepared_at"]
    assert verify_assertion(second["assertion"], desk.assertion_key.public_key(), session_id=cmd.session_id,
                            sub="tester", call_id=cmd.call_id, tool=cmd.tool, at=asked_at).sub == "tester"
    assert all(verify_request(RequestApprovalV1.model_validate(sent), desk.ledger_key.public_key())
               for sent in (first, second))  # the edited version's request is the ledger's, signed alike
    assert desk.state.operations[edit.operation_id].supersedes == cmd.operation_id


@pytest.mark.parametrize("change", [{"call_id": "another-call"}, {"session_id": "S-other"},
                                    {"supersedes": "op-never-prepared"}])
async def test_an_edit_of_another_call_session_or_of_nothing_is_refused(desk, change):
    cmd = await desk.prepared("adjust_stock", STOCK)
    edit = edit_of(desk, cmd, {**STOCK, "delta": 2}, **change)

    with pytest.raises(InvalidMessage) as refused:
        await desk.operations.prepare(edit)

    assert refused.value.reason == "supersedes_unknown"
    assert edit.operation_id not in desk.state.operations and len(requests_sent(desk)) == 1


async def test_an_edit_cannot_name_another_requester(desk):
    cmd = await desk.prepared("adjust_stock", STOCK)
    await desk.operations.prepare(edit_of(desk, cmd, {**STOCK, "delta": 2}, requested_by="victim"))

    assert requests_sent(desk)[-1]["requested_by"] == "tester"
    assert desk.state.operations[f"{cmd.operation_id}-e"].requested_by == "tester"


async def test_a_crash_before_the_prepare_commits_leaves_neither_operation_nor_request(desk, monkeypatch):
    cmd = desk.prepare_cmd("adjust_stock", STOCK)

    def crash(name):
        if name == "erp.prepare.before_db_commit":
            raise SystemExit(137)

    monkeypatch.setattr(operations, "failpoint", crash)
    with pytest.raises(SystemExit):
        await desk.operations.prepare(cmd)
    assert desk.state.operations == {} and desk.ledger.sent == [] and desk.ledger.inbox == {}

    monkeypatch.undo()
    await desk.operations.prepare(cmd)
    assert [r["operation_id"] for r in requests_sent(desk)] == [cmd.operation_id]


async def test_commit_applies_the_effect_consumes_the_grant_and_writes_the_event(desk):
    cmd = await submit(desk)
    grant = desk.grant(cmd, pending_id="pa-1")
    status = await desk.commit(cmd, grant)

    assert status.status == "committed"
    assert (status.session_id, status.call_id, status.pending_id, status.decided_by) == (
        cmd.session_id, cmd.call_id, "pa-1", "approver")
    order_id = status.result["order_id"]
    assert desk.state.orders[order_id].draft_id == "D-1"
    assert desk.state.products["SKU-A"].on_hand == 10
    assert desk.state.drafts["D-1"].status == "submitted"
    assert desk.state.consumed_grants == {"pa-1": cmd.operation_id}
    [event] = [m for m in desk.ledger.sent if m.subject == subjects.ERP_EVT_OPERATION_FINISHED]
    assert event.msg_id == f"erp.operation_finished.{cmd.operation_id}"
    assert event.payload == status.model_dump(mode="json")
    assert desk.ledger.wakes >= 1


async def test_a_repeated_commit_answers_the_recorded_outcome_without_a_second_effect(desk):
    cmd = await submit(desk)
    grant = desk.grant(cmd)
    first = await desk.commit(cmd, grant)
    again = await desk.commit(cmd, grant)

    assert again == first
    assert desk.state.products["SKU-A"].on_hand == 10
    assert len(desk.state.orders) == 1
    assert len(desk.ledger.sent_on(subjects.ERP_EVT_OPERATION_FINISHED)) == 1


@pytest.mark.parametrize(("change", "code"), [
    ({"price_minor": 1100}, "quote_changed"),
    ({"on_hand": 11}, "stock_changed"),
])
async def test_commit_rejects_a_submit_whose_price_or_stock_moved_since_prepare(desk, change, code):
    cmd = await submit(desk)
    desk.state.products["SKU-A"] = replace(desk.state.products["SKU-A"], **change)
    status = await desk.commit(cmd)

    assert status.status == "rejected" and status.error.code == code
    assert desk.state.orders == {}
    assert desk.state.drafts["D-1"].status == "open"
    assert desk.ledger.sent_on(subjects.ERP_EVT_OPERATION_FINISHED)[0]["status"] == "rejected"


async def test_sufficient_stock_check_commits_when_stock_moved_but_still_covers_the_lines(desk):
    cmd = await submit(desk)
    desk.state.products["SKU-A"] = replace(desk.state.products["SKU-A"], on_hand=5)
    status = await desk.commit(cmd, desk.grant(cmd, stock_check="sufficient"))

    assert status.status == "committed"
    assert desk.state.products["SKU-A"].on_hand == 3


async def test_commit_rejects_a_submit_whose_draft_got_a_new_revision_since_prepare(desk):
    cmd = await submit(desk)
    await desk.drafts.handle(desk.draft_cmd("set_draft_note", {"draft_id": "D-1", "base_revision": 1, "note": "x"}))
    status = await desk.commit(cmd)

    assert status.status == "rejected" and status.error.code == "draft_changed"
    assert desk.state.orders == {}


def unchanged(desk, cmd, events_before: int) -> None:
    assert desk.state.operations[cmd.operation_id].status == "prepared"
    assert len(desk.ledger.sent_on(subjects.ERP_EVT_OPERATION_FINISHED)) == events_before


async def test_a_grant_that_does_not_verify_or_names_another_operation_is_an_invalid_message(desk):
    cmd = await submit(desk)
    forged = desk.grant(cmd, key=Ed25519PrivateKey.generate())
    elsewhere = desk.grant(cmd, operation_id="op-other")

    for grant, reason in ((forged, "invalid_grant"), (elsewhere, "grant_for_another_operation")):
        with pytest.raises(InvalidMessage) as refused:
            await desk.commit(cmd, grant)
        assert (refused.value.reason, refused.value.status) == (reason, 422)
    unchanged(desk, cmd, 0)
    assert desk.state.consumed_grants == {}


async def test_a_grant_is_used_once_even_across_operations(desk):
    first = await desk.prepared("adjust_stock", STOCK)
    second = await desk.prepared("adjust_stock", {**STOCK, "reason": "found again"})
    await desk.commit(first, desk.grant(first, pending_id="pa-1"))
    with pytest.raises(InvalidMessage) as refused:
        await desk.commit(second, desk.grant(second, pending_id="pa-1"))

    assert refused.value.reason == "grant_already_used"
    unchanged(desk, second, 1)
    assert desk.state.products["SKU-A"].on_hand == 13


async def test_commit_of_an_unprepared_operation_or_with_another_fingerprint_is_an_invalid_message(desk):
    cmd = await submit(desk)
    unknown = desk.prepare_cmd("adjust_stock", STOCK)
    with pytest.raises(InvalidMessage) as never:
        await desk.commit(unknown)
    assert never.value.reason == "never_prepared"

    other = desk.prepare_cmd("adjust_stock", {**STOCK, "delta": 2}, operation_id=cmd.operation_id)
    with pytest.raises(InvalidMessage) as conflict:
        await desk.commit(cmd, desk.grant(other))
    assert conflict.value.reason == "operation_conflict"
    unchanged(desk, cmd, 0)


async def test_a_crash_before_the_database_commit_leaves_nothing_and_the_redelivery_commits(desk, monkeypatch):
    cmd = await submit(desk)
    grant = desk.grant(cmd)

    def crash(name):
        if name == "erp.commit.before_db_commit":
            raise SystemExit(137)

    monkeypatch.setattr(operations, "failpoint", crash)
    with pytest.raises(SystemExit):
        await desk.commit(cmd, grant)
    unchanged(desk, cmd, 0)
    assert desk.state.consumed_grants == {}
    assert desk.state.products["SKU-A"].on_hand == 12

    monkeypatch.undo()
    status = await desk.commit(cmd, grant)
    assert status.status == "committed"
    assert desk.state.products["SKU-A"].on_hand == 10


async def test_a_second_credit_note_that_no_longer_fits_when_it_commits_is_rejected_and_issues_nothing(desk):
    order = (await desk.commit(await submit(desk))).result  # 2 x SKU-A: 2000 EUR minor units
    credit = {"order_id": order["order_id"], "amount_minor": 1200, "currency": "EUR", "reason": "late"}
    first, second = await desk.prepared("issue_credit_note", credit), await desk.prepared("issue_credit_note", credit)

    issued = await desk.commit(first)
    assert issued.status == "committed" and issued.result["credit_note_id"].startswith("CN-")
    assert issued.result["remaining_minor"] == order["total_amount_minor"] - 1200
    refused = await desk.commit(second)  # the ledger's credit notes, loaded with the locked order, are re-counted
    assert (refused.status, refused.error.code) == ("rejected", "credit_exceeds_remaining")
    assert [n.credit_note_id for n in desk.state.credit_notes.values()] == [issued.result["credit_note_id"]]
    assert desk.state.orders[order["order_id"]].refunded_minor == 0  # a credit note refunds nothing
