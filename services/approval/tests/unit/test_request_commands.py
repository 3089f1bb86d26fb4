"""``cmd.approval.request`` (``requests.request_approval``) on the memory unit of work: the ledger's request is
stored with its event and audit row under the database clock once its ledger signature and the gateway's assertion
for its requester verify; a request the ledger did not sign (or one changed since) is refused before anything is
read; a repeat answers the stored record; a request without a valid assertion is an invalid message and
stores nothing; a policy refusal stores nothing and tells the agent (``evt.approval.request_refused``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_approval.domain.policy import load_policy
from erpilot_approval.service_layer import requests
from erpilot_approval.service_layer.requests import request_approval
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_platform.refusals import InvalidMessage

from ..fakes import NOW
from .conftest import Desk, build_request, refusal_of, signed, vouched

pytestmark = pytest.mark.unit


def nothing_stored(desk: Desk) -> bool:
    return desk.state.approvals == {} and desk.state.audit == [] and desk.uow.sent == []


async def test_a_vouched_request_stores_a_pending_approval_with_its_event_and_audit_row(desk):
    cmd = desk.request_cmd("submit_order")
    record = await request_approval(cmd, desk.ports)

    assert record.status == "pending" and record.requested_by == "alice"
    stored = desk.approval(record.pending_id)
    assert (stored.operation_id, stored.required_roles) == (cmd.operation_id, ["approver", "manager"])
    assert stored.preview == cmd.preview.model_dump(mode="json")  # the ledger's own preview
    assert stored.created_at == NOW and stored.expires_at == NOW + timedelta(minutes=15)  # the unit's clock
    assert [event["record"]["pending_id"] for event in desk.events(subjects.APPROVAL_EVT_REQUESTED)] == [
        record.pending_id]
    assert [(row.kind, row.actor) for row in desk.state.audit] == [("request", "alice")]
    assert (desk.uow.wakes, desk.deadlines) == (1, 1)  # the relay and the sweeper were told


async def test_a_request_relayed_late_is_judged_by_when_the_ledger_accepted_its_assertion(desk):
    cmd = desk.request_cmd()
    desk.uow.advance(timedelta(hours=5))  # the relay was down for hours: the assertion has long expired now

    record = await request_approval(cmd, desk.ports)
    assert record.status == "pending" and record.created_at == NOW + timedelta(hours=5)


async def test_a_repeated_request_answers_the_stored_record_and_stores_nothing_more(desk):
    cmd = desk.request_cmd()
    first = await request_approval(cmd, desk.ports)
    desk.uow.advance(30)

    again = await request_approval(cmd, desk.ports)
    assert again == first
    assert len(desk.state.approvals) == 1 and len(desk.events(subjects.APPROVAL_EVT_REQUESTED)) == 1
    assert (desk.uow.wakes, desk.deadlines) == (1, 1)


async def test_a_repeat_under_the_same_operation_id_with_another_fingerprint_is_a_conflict(desk):
    cmd = desk.request_cmd("adjust_stock")
    first = await request_approval(cmd, desk.ports)
    other = desk.request_cmd("adjust_stock", operation_id=cmd.operation_id,
                             arguments={"sku": "SKU-1", "delta": -4, "reason": "count"})

    refused = await refusal_of(request_approval(other, desk.ports))
    assert (refused.code, refused.status) == ("idempotency_conflict", 409)
    assert list(desk.state.approvals) == [first.pending_id]
    assert desk.events(subjects.APPROVAL_EVT_REQUEST_REFUSED) == []  # the first request's approval stands


@pytest.mark.parametrize("other", [{"call_id": "call-other"}, {"session_id": "ses-other"}])
async def test_a_repeat_under_the_same_operation_id_from_another_call_or_session_is_a_conflict(desk, other):
    cmd = desk.request_cmd("adjust_stock")
    first = await request_approval(cmd, desk.ports)

    refused = await refusal_of(request_approval(desk.request_cmd("adjust_stock", operation_id=cmd.operation_id,
                                                                 **other), desk.ports))
    assert (refused.code, refused.status) == ("idempotency_conflict", 409)
    assert list(desk.state.approvals) == [first.pending_id]


FORGED_KEY = Ed25519PrivateKey.generate()


@pytest.mark.parametrize(("vouch", "reason"), [
    (lambda request: signed(vouched(request).model_copy(update={"assertion": None})), "assertion_missing"),
    (lambda request: vouched(request, key=FORGED_KEY), "assertion_invalid"),  # not the gateway's key
    (lambda request: vouched(request, sub="mallory"), "assertion_subject_mismatch"),  # vouches for someone else
    (lambda request: vouched(request, session_id="sess-other"), "assertion_session_mismatch"),
    # the assertion of another call of the requester, the read the agent took it from (issue #32)
    (lambda request: vouched(request, call_id="call-a-read", tool="search_products"), "assertion_call_mismatch"),
    (lambda request: vouched(request, tool="search_products"), "assertion_call_mismatch"),  # the read's own id
    # Accepted by the ledger two hours after the gateway vouched: expired then (1 h lifetime).
    (lambda request: signed(vouched(request).model_copy(update={"asserted_at": NOW + timedelta(hours=2)})),
     "assertion_expired"),
])
async def test_a_request_without_a_valid_assertion_for_its_requester_is_an_invalid_message(desk, vouch, reason):
    # The compromised agent's forgery of issue 25: "victim" named as the requester of a real operation.
    cmd = vouch(build_request("submit_order", requested_by="alice"))

    refused = await refusal_of(request_approval(cmd, desk.ports))
    assert isinstance(refused, InvalidMessage) and refused.code == "invalid_message"
    assert refused.details == {"reason": reason}
    assert nothing_stored(desk) and desk.uow.commits == 0


class Untouchable:
    """A unit of work that must not be reached: a request the ledger did not sign is refused before any read."""

    async def run(self, work):
        raise AssertionError("the unit of work was used")

    read = run


LEDGERS_AMOUNT, INVENTED_AMOUNT = 2_000_000, 1  # a manager's decision; anyone's


def ledgers_request(desk: Desk) -> RequestApprovalV1:
    """The ledger's own request for a large order of Alice's (signed, vouched for), as its outbox sends it."""
    return desk.request_cmd("submit_order", LEDGERS_AMOUNT)


def invented(cmd: RequestApprovalV1) -> RequestApprovalV1:
    """The compromised agent's copy of ``cmd``: Alice's real assertion, the real operation id and fingerprint, and
    an invented preview (amount 1, which also lowers the role it needs)."""
    return cmd.model_copy(update={"preview": cmd.preview.model_copy(update={"amount_minor": INVENTED_AMOUNT,
                                                                            "target": "trusted"})})


@pytest.mark.parametrize(("forge", "reason"), [
    (lambda cmd: invented(cmd).model_copy(update={"ledger_signature": None}), "ledger_signature_missing"),
    (lambda cmd: invented(cmd).model_copy(update={"ledger_signature": ""}), "ledger_signature_missing"),
    (invented, "ledger_signature_invalid"),  # the ledger's signature kept, the preview changed
    (lambda cmd: signed(invented(cmd), key=FORGED_KEY), "ledger_signature_invalid"),  # a key of its own
    (lambda cmd: invented(cmd).model_copy(update={"ledger_signature": "not base64!"}), "ledger_signature_invalid"),
], ids=["unsigned", "empty", "tampered", "another key", "malformed"])
async def test_a_request_the_ledger_did_not_sign_is_an_invalid_message_and_nothing_is_read_or_stored(
        desk, forge, reason):
    forged = forge(ledgers_request(desk))

    refused = await refusal_of(request_approval(forged, replace(desk.ports, unit=Untouchable())))
    assert isinstance(refused, InvalidMessage) and refused.details == {"reason": reason}
    refused = await refusal_of(request_approval(forged, desk.ports))
    assert refused.details == {"reason": reason}
    assert nothing_stored(desk) and desk.uow.commits == 0


async def test_a_forged_request_sent_before_the_ledgers_cannot_make_the_ledgers_a_repeat(desk):
    # Issue 25's hole on a development stack (no NATS permissions): the agent sends its own request for the real
    # operation before its prepare, then the ledger's request arrives and would only have repeated it.
    ledgers = ledgers_request(desk)
    refused = await refusal_of(request_approval(invented(ledgers).model_copy(update={"ledger_signature": None}),
                                                desk.ports))
    assert refused.details == {"reason": "ledger_signature_missing"} and nothing_stored(desk)

    record = await request_approval(ledgers, desk.ports)
    stored = desk.approval(record.pending_id)
    assert stored.preview["amount_minor"] == record.preview.amount_minor == LEDGERS_AMOUNT
    assert stored.preview == ledgers.preview.model_dump(mode="json") and stored.required_roles == ["manager"]
    assert [event["record"]["preview"]["amount_minor"]
            for event in desk.events(subjects.APPROVAL_EVT_REQUESTED)] == [LEDGERS_AMOUNT]

    # Sent again after it, the forgery is not even taken for a repeat of the stored request.
    refused = await refusal_of(request_approval(signed(invented(ledgers), key=FORGED_KEY), desk.ports))
    assert refused.details == {"reason": "ledger_signature_invalid"}
    assert desk.approval(record.pending_id).preview["amount_minor"] == LEDGERS_AMOUNT


async def test_the_ledgers_signature_is_checked_before_the_requester_and_the_edit(desk):
    unsigned = vouched(build_request("submit_order")).model_copy(update={"assertion": None, "ledger_signature": None})
    assert (await refusal_of(request_approval(unsigned, desk.ports))).details == {
        "reason": "ledger_signature_missing"}
    edit = ledgers_request(desk).model_copy(update={"supersedes": "op-elsewhere", "ledger_signature": None})
    assert (await refusal_of(request_approval(edit, desk.ports))).details == {"reason": "ledger_signature_missing"}
    assert nothing_stored(desk)


@pytest.mark.parametrize(("changes", "code", "status"), [
    ({"tool": "refund_payment", "arguments": {"order_id": "O-1", "amount_minor": 500, "currency": "EUR",
                                               "channel": "original", "x": 1}}, "invalid_arguments", 422),
    ({"tool": "cancel_order", "arguments": {"order_id": "O-1", "reason": None}}, "invalid_arguments", 422),
    ({"tool_schema_version": 2}, "invalid_request", 422),
    ({"fingerprint": "sha256:" + "0" * 64}, "invalid_request", 422),
])
async def test_a_request_the_policy_refuses_stores_nothing_and_tells_the_agent(desk, changes, code, status):
    changes = dict(changes)
    cmd = desk.request_cmd(changes.pop("tool", "submit_order"), **changes)

    refused = await refusal_of(request_approval(cmd, desk.ports))
    assert (refused.code, refused.status) == (code, status)
    assert desk.state.approvals == {} and desk.state.audit == []
    [told] = desk.events(subjects.APPROVAL_EVT_REQUEST_REFUSED)
    assert (told["session_id"], told["call_id"], told["operation_id"]) == (cmd.session_id, cmd.call_id,
                                                                           cmd.operation_id)
    assert (told["error"]["code"], told["refused_at"]) == (code, NOW.isoformat().replace("+00:00", "Z"))
    [sent] = desk.uow.sent
    assert sent.msg_id == f"approval.request_refused.{cmd.operation_id}"  # a redelivery tells it once


@pytest.mark.parametrize(("policy", "tool", "code"), [
    ("[tools.adjust_stock]\naction = 'deny'\n", "adjust_stock", "policy_denied"),
    ("[tools.adjust_stock]\naction = 'allow'\n", "adjust_stock", "approval_not_required"),
])
async def test_a_tool_the_policy_denies_or_allows_as_is_gets_no_approval(policy, tool, code):
    desk = Desk(load_policy(policy))
    cmd = desk.request_cmd(tool)

    refused = await refusal_of(request_approval(cmd, desk.ports))
    assert refused.code == code
    assert desk.state.approvals == {}
    assert [told["error"]["code"] for told in desk.events(subjects.APPROVAL_EVT_REQUEST_REFUSED)] == [code]


async def test_an_unknown_tool_is_refused_and_told(desk):
    request = replace(build_request("submit_order"), tool="rm_rf", arguments={},
                      fingerprint=fingerprint("submit_order", 1, {}))
    cmd = vouched(request)  # the gateway vouched for a call of that tool (an assertion names its call's tool)
    refused = await refusal_of(request_approval(cmd, desk.ports))
    assert refused.code == "unknown_tool" and desk.state.approvals == {}
    assert len(desk.events(subjects.APPROVAL_EVT_REQUEST_REFUSED)) == 1


async def test_a_stored_approval_is_answered_even_when_the_policy_now_refuses_its_tool(policy):
    desk = Desk(policy)
    cmd = desk.request_cmd("adjust_stock")
    first = await request_approval(cmd, desk.ports)
    # A restart with another policy, then a redelivery.
    desk.ports = replace(desk.ports, policy=load_policy("[tools.adjust_stock]\naction = 'deny'\n"))

    assert await request_approval(cmd, desk.ports) == first
    assert desk.events(subjects.APPROVAL_EVT_REQUEST_REFUSED) == []  # the agent must not finish the call


class Crash(BaseException):
    """The process died at a failpoint (``os._exit`` in the real thing: nothing after it runs)."""


def arm(monkeypatch, desk: Desk, name: str) -> list[tuple[str, int]]:
    """Crash at ``name`` once; every failpoint reached is recorded with how many approvals were committed."""
    reached, armed = [], {name}

    def failpoint(point: str) -> None:
        reached.append((point, len(desk.state.approvals)))
        if point in armed:
            armed.clear()
            raise Crash(point)

    monkeypatch.setattr(requests, "failpoint", failpoint)
    return reached


async def test_a_crash_before_the_request_commits_leaves_nothing_and_the_redelivery_stores_it_once(desk,
                                                                                                 monkeypatch):
    reached = arm(monkeypatch, desk, "approval.request.before_db_commit")
    cmd = desk.request_cmd()
    with pytest.raises(Crash):
        await request_approval(cmd, desk.ports)
    assert reached == [("approval.request.before_db_commit", 0)]
    assert nothing_stored(desk)

    record = await request_approval(cmd, desk.ports)  # JetStream redelivers the unacknowledged command
    assert reached[1:] == [("approval.request.before_db_commit", 0), ("approval.request.after_db_commit", 1)]
    assert len(desk.state.approvals) == 1 and [e["record"]["pending_id"] for e in desk.events(
        subjects.APPROVAL_EVT_REQUESTED)] == [record.pending_id]


async def test_a_crash_after_the_request_commits_keeps_it_and_the_redelivery_answers_it(desk, monkeypatch):
    reached = arm(monkeypatch, desk, "approval.request.after_db_commit")
    cmd = desk.request_cmd()
    with pytest.raises(Crash):
        await request_approval(cmd, desk.ports)
    assert reached[-1] == ("approval.request.after_db_commit", 1)
    [stored] = desk.state.approvals.values()
    assert len(desk.events(subjects.APPROVAL_EVT_REQUESTED)) == 1  # in the outbox: the relay publishes it

    again = await request_approval(cmd, desk.ports)
    assert again.pending_id == stored.pending_id and len(desk.state.approvals) == 1
    assert len(desk.events(subjects.APPROVAL_EVT_REQUESTED)) == 1 and len(desk.state.audit) == 1


async def test_a_field_a_newer_ledger_added_to_the_preview_is_verified_stored_and_passed_on(desk):
    newer = {"operation": "Submit order", "object": "Draft D-1 revision 2", "target": "Nordwind",
             "amount_minor": 12_345, "currency": "EUR", "tax_minor": 1_975}  # tax_minor: unknown to PreviewV1
    cmd = desk.request_cmd(preview=newer)
    received = RequestApprovalV1.model_validate_json(cmd.model_dump_json())  # as the entry table parses it

    record = await request_approval(received, desk.ports)
    assert record.status == "pending" and record.preview.model_extra == {"tax_minor": 1_975}
    assert desk.approval(record.pending_id).preview["tax_minor"] == 1_975  # stored as the ledger wrote it
    [event] = desk.events(subjects.APPROVAL_EVT_REQUESTED)
    assert event["record"]["preview"]["tax_minor"] == 1_975  # and passed on to the agent and people
