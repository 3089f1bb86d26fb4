"""Escalation (SPEC §10) on the memory unit of work: the policy keys, the time and role fixed when an approval is
stored, the sweeper that adds the role once with its event and audit row, never after a decision or the
deadline, the deadline never moved; the webhook notice."""

from __future__ import annotations

from datetime import timedelta

import pytest

from erpilot_approval.domain.policy import PolicyError, load_policy
from erpilot_approval.domain.webhooks import Webhook
from erpilot_approval.service_layer.edits import edit
from erpilot_approval.service_layer.escalation import escalate_due, escalation_sweeper
from erpilot_approval.service_layer.queries import list_approvals
from erpilot_approval.service_layer.sweeper import EPSILON_SECONDS, LISTENING_POLL_SECONDS
from erpilot_approval.service_layer.webhook_events import WebhookEvents
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import Actor, ApprovalEscalatedV1, EditApprovalV1, ListApprovalsV1
from erpilot_platform.loops import Soon

from ..fakes import NOW
from .conftest import Desk, refusal_of

pytestmark = pytest.mark.unit

POLICY = """
[tools.cancel_order]
escalate_after = "30s"
escalate_to = "manager"
[tools.submit_order]
roles = ["approver"]
escalate_after = "10m"
escalate_to = "manager"
[[tools.submit_order.rules]]
min_amount_minor = 100000
roles = ["approver"]
escalate_after = "1m"
"""
MANAGER = Actor(sub="max", roles=["manager"])


@pytest.fixture
def desk() -> Desk:
    return Desk(load_policy(POLICY))


async def listed_for(desk: Desk, actor: Actor) -> list[str]:
    return [item.pending_id for item in (await list_approvals(ListApprovalsV1(actor=actor), desk.ports)).items]


# --- the policy ------------------------------------------------------------------------------------------------
def test_escalation_comes_per_tool_and_per_amount_rule():
    submit = load_policy(POLICY).for_tool("submit_order")
    assert submit.escalation_for(5_000) == (timedelta(minutes=10), "manager")
    assert submit.escalation_for(100_000) == (timedelta(minutes=1), "manager")  # the rule's time, the tool's role
    assert load_policy(None).for_tool("submit_order").escalation_for(5_000) is None  # off by default


@pytest.mark.parametrize(("text", "key"), [
    ('[tools.cancel_order]\nescalate_after = "30s"\n', "tools.cancel_order.escalate_to"),
    ('[tools.cancel_order]\nescalate_to = "manager"\n', "tools.cancel_order.escalate_after"),
    ('[tools.cancel_order]\nescalate_after = "soon"\nescalate_to = "manager"\n', "tools.cancel_order.escalate_after"),
    ('[tools.cancel_order]\nescalate_after = 30\nescalate_to = "manager"\n', "tools.cancel_order.escalate_after"),
    ('[tools.cancel_order]\nescalate_after = "30s"\nescalate_to = "boss"\n', "tools.cancel_order.escalate_to"),
    ('[tools.cancel_order]\nescalate_after = "30s"\nescalate_to = ["manager"]\n', "tools.cancel_order.escalate_to"),
    ('[tools.cancel_order]\nescalate_after = "15m"\nescalate_to = "manager"\n', "tools.cancel_order.escalate_after"),
    ('[[tools.submit_order.rules]]\nmin_amount_minor = 1\nroles = ["manager"]\nescalate_after = "1m"\n',
     "tools.submit_order.rules[0].escalate_to"),
    ('[[tools.submit_order.rules]]\nmin_amount_minor = 1\nroles = ["manager"]\nescalate_to = "x"\n',
     "tools.submit_order.rules[0].escalate_to"),
])
def test_a_malformed_escalation_stops_start_up_naming_the_key(text, key):
    with pytest.raises(PolicyError) as error:
        load_policy(text)
    assert str(error.value).startswith(f"{key}:"), error.value


# --- the sweeper -----------------------------------------------------------------------------------------------
async def test_an_undecided_approval_gains_the_role_once_with_its_event_and_audit_row(desk):
    record = await desk.request("cancel_order", requested_by="rita")
    assert (record["escalate_to"], record["escalate_at"], record["escalated_at"]) == (
        "manager", (NOW + timedelta(seconds=30)).isoformat().replace("+00:00", "Z"), None)
    assert await listed_for(desk, MANAGER) == []
    refused = await refusal_of(desk.decide(record, "approve", "max", "manager"))
    assert refused.code == "forbidden"
    desk.uow.advance(timedelta(seconds=29))
    assert await escalate_due(desk.uow, 10) == 0  # not yet

    desk.uow.advance(timedelta(seconds=1))
    assert await escalate_due(desk.uow, 10) == 1
    assert await escalate_due(desk.uow, 10) == 0  # once

    escalated = desk.approval(record["pending_id"])
    assert (escalated.required_roles, escalated.escalated_at) == (["approver", "manager"], NOW + timedelta(seconds=30))
    assert escalated.expires_at == NOW + timedelta(minutes=15)  # the deadline is never moved
    [event] = desk.events(subjects.APPROVAL_EVT_ESCALATED)
    assert (event["escalated_to"], event["required_roles"]) == ("manager", ["approver", "manager"])
    assert [m.msg_id for m in desk.uow.sent if m.subject == subjects.APPROVAL_EVT_ESCALATED] == [
        f"approval.escalated.{record['pending_id']}"]
    assert desk.state.audit[-1].kind == "escalation" and desk.state.audit[-1].actor == "system:escalation"
    assert await listed_for(desk, MANAGER) == [record["pending_id"]]
    decided = await desk.decide(record, "approve", "max", "manager")
    assert (decided.status, decided.escalated_at) == ("approved", NOW + timedelta(seconds=30))


async def test_a_decision_already_made_stands_and_nothing_escalates_after_it(desk):
    record = await desk.request("cancel_order", requested_by="rita")
    await desk.decide(record, "reject", "bob", "approver")
    desk.uow.advance(timedelta(minutes=1))

    assert await escalate_due(desk.uow, 10) == 0
    assert desk.events(subjects.APPROVAL_EVT_ESCALATED) == []
    assert desk.approval(record["pending_id"]).required_roles == ["approver"]
    assert await desk.uow.read(lambda unit: unit.approvals.seconds_to_next_escalation()) is None


async def test_an_approval_past_its_deadline_expires_and_never_escalates(desk):
    record = await desk.request("cancel_order", requested_by="rita")
    desk.uow.advance(timedelta(minutes=15))  # at the deadline, never swept

    assert await escalate_due(desk.uow, 10) == 0
    assert desk.approval(record["pending_id"]).escalated_at is None
    assert await desk.uow.read(lambda unit: unit.approvals.seconds_to_next_escalation()) is None


async def test_the_amount_rule_decides_when(desk):
    small = await desk.request("submit_order", amount_minor=5_000)
    large = await desk.request("submit_order", amount_minor=250_000)
    desk.uow.advance(timedelta(minutes=1))

    assert await escalate_due(desk.uow, 10) == 1
    assert [e["pending_id"] for e in desk.events(subjects.APPROVAL_EVT_ESCALATED)] == [large["pending_id"]]
    assert desk.approval(small["pending_id"]).escalated_at is None


async def test_an_edited_version_escalates_on_its_own_clock(desk):
    record = await desk.request("submit_order", requested_by="rita")
    desk.uow.advance(timedelta(minutes=5))
    edited = await edit(EditApprovalV1(pending_id=record["pending_id"], fingerprint=record["fingerprint"],
                                       arguments={"draft_id": "D-1", "revision": 3},
                                       actor=Actor(sub="bob", roles=["approver"])), desk.ports)

    assert edited.escalated_at is None and edited.escalate_at == NOW + timedelta(minutes=15)
    desk.uow.advance(timedelta(minutes=5))  # the old version's time, long superseded
    assert await escalate_due(desk.uow, 10) == 0


async def test_the_sweeper_sleeps_until_the_next_escalation(desk):
    sweeper = escalation_sweeper(desk.uow, poll_seconds=1.0, listening=lambda: True)
    assert await sweeper.sweep_due() == Soon(LISTENING_POLL_SECONDS)  # nothing to escalate: the long sleep
    await desk.request("cancel_order")
    assert await sweeper.sweep_due() == Soon(30 + EPSILON_SECONDS)
    desk.uow.advance(timedelta(seconds=30))
    assert await sweeper.sweep_due() == Soon(0)  # escalated one; more may be due
    assert len(desk.events(subjects.APPROVAL_EVT_ESCALATED)) == 1


# --- the webhook -----------------------------------------------------------------------------------------------
HOOK = Webhook(url="https://hooks.example/e", events=("approval.escalated",), secret="0123456789abcdef")


async def test_an_escalation_becomes_a_webhook_unless_the_approval_ended_first(desk):
    events = WebhookEvents(desk.uow, (HOOK,), "https://erpilot.example")
    waiting = await desk.request("cancel_order", requested_by="rita")
    decided = await desk.request("cancel_order", requested_by="rita")
    desk.uow.advance(timedelta(seconds=30))
    assert await escalate_due(desk.uow, 10) == 2
    await desk.decide(decided, "approve", "bob", "approver")

    for event in desk.events(subjects.APPROVAL_EVT_ESCALATED):
        await events.on_escalated(ApprovalEscalatedV1.model_validate(event))
        await events.on_escalated(ApprovalEscalatedV1.model_validate(event))  # redelivered: nothing more

    [row] = desk.state.webhooks
    assert (row.event_type, row.pending_id) == ("approval.escalated", waiting["pending_id"])
    assert '"escalated_to":"manager"' in row.body and "escalated to a manager" in row.body
