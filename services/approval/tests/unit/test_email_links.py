"""Approval email links (SPEC §11 "Approval channels") on the memory unit of work: a link decides once, as the
person it was signed for with the roles the people directory gives them now, through the decision's own checks;
a forged, used, superseded or expired link decides nothing. And who gets a mail, and what it says."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from erpilot_approval.domain.links import Link, link_key, mint, recipients
from erpilot_approval.domain.mail import approval_email
from erpilot_approval.domain.people import Contact
from erpilot_approval.service_layer.email_links import decide_by_link, email_link
from erpilot_contracts.approval.links import DecideByLinkV1, EmailLinkV1

from .conftest import SIGNING_KEY, Desk, refusal_of

pytestmark = pytest.mark.unit
PEOPLE = {"alice": ("requester", "approver"), "bob": ("approver",), "carol": ("requester",)}


@pytest.fixture
def desk(policy) -> Desk:
    desk = Desk(policy)
    desk.ports = dataclasses.replace(desk.ports, people=lambda: PEOPLE)
    return desk


def link_for(desk: Desk, record: dict, sub: str, action: str = "approve", **changes) -> str:
    approval = desk.approval(record["pending_id"])
    fields = {"pending_id": approval.pending_id, "sub": sub, "action": action,
              "fingerprint": approval.fingerprint, "expires_at": approval.expires_at, **changes}
    return mint(link_key(SIGNING_KEY), Link(**fields))


async def test_a_link_decides_once_as_its_person_and_its_second_use_says_already_used(desk):
    record = await desk.request("submit_order")
    token = link_for(desk, record, "bob")

    view = await email_link(EmailLinkV1(pending_id=record["pending_id"], token=token), desk.ports)
    assert (view.sub, view.action) == ("bob", "approve")
    assert desk.approval(record["pending_id"]).votes == ()  # opening the link decides nothing

    decided = await decide_by_link(DecideByLinkV1(pending_id=record["pending_id"], token=token), desk.ports)
    assert (decided.status, decided.decided_by) == ("approved", "bob")

    again = await refusal_of(decide_by_link(DecideByLinkV1(pending_id=record["pending_id"], token=token),
                                            desk.ports))
    assert (again.code, again.status) == ("link_used", 409)
    shown = await refusal_of(email_link(EmailLinkV1(pending_id=record["pending_id"], token=token), desk.ports))
    assert shown.code == "link_used"
    assert [(d.actor, d.action) for d in desk.state.decisions] == [("bob", "approve")]


@pytest.mark.parametrize("tamper", ["signature", "payload", "other_approval"])
async def test_a_forged_link_is_refused_and_decides_nothing(desk, tamper):
    record = await desk.request("submit_order")
    other = await desk.request("submit_order")
    token = link_for(desk, record, "bob")
    payload, mac = token.split(".")
    pending_id = record["pending_id"]
    if tamper == "signature":
        token = payload + "." + ("A" if mac[0] != "A" else "B") + mac[1:]
    elif tamper == "payload":  # the same signature over another person's link
        token = link_for(desk, record, "carol").split(".")[0] + "." + mac
    else:
        pending_id = other["pending_id"]

    refusal = await refusal_of(decide_by_link(DecideByLinkV1(pending_id=pending_id, token=token), desk.ports))
    assert (refusal.code, refusal.status) == ("invalid_link", 403)
    assert desk.state.decisions == [] and desk.approval(pending_id).votes == ()


async def test_a_link_of_the_requester_meets_separation_of_duties(desk):
    record = await desk.request("submit_order")  # asked by alice, who is also an approver in the directory

    refusal = await refusal_of(decide_by_link(
        DecideByLinkV1(pending_id=record["pending_id"], token=link_for(desk, record, "alice")), desk.ports))
    assert refusal.code == "separation_of_duties" and desk.state.decisions == []


async def test_a_link_of_a_person_with_no_deciding_role_now_decides_nothing(desk):
    record = await desk.request("submit_order")

    refusal = await refusal_of(decide_by_link(
        DecideByLinkV1(pending_id=record["pending_id"], token=link_for(desk, record, "carol")), desk.ports))
    assert refusal.status == 403 and desk.state.decisions == []


async def test_a_link_past_the_deadline_says_expired(desk):
    record = await desk.request("submit_order")
    token = link_for(desk, record, "bob")
    desk.uow.advance(desk.approval(record["pending_id"]).expires_at - desk.uow.clock() + timedelta(seconds=1))

    refusal = await refusal_of(decide_by_link(DecideByLinkV1(pending_id=record["pending_id"], token=token),
                                              desk.ports))
    assert (refusal.code, refusal.status) == ("expired", 410) and desk.state.decisions == []


async def test_a_link_to_an_older_version_says_superseded(desk):
    record = await desk.request("submit_order")
    token = link_for(desk, record, "bob", fingerprint="sha256:" + "0" * 64)

    refusal = await refusal_of(decide_by_link(DecideByLinkV1(pending_id=record["pending_id"], token=token),
                                              desk.ports))
    assert (refusal.code, refusal.status) == ("superseded", 409) and desk.state.decisions == []


def test_the_mail_goes_to_each_person_with_an_address_who_may_decide_it_but_not_its_requester(make_pending):
    approval = make_pending("submit_order")  # required roles: approver; asked by alice
    contacts = {"alice": Contact(email="alice@example.com"), "bob": Contact(email="bob@example.com"),
                "carol": Contact(email="carol@example.com"), "dave": Contact(chat_id="U1")}
    assert recipients(approval, {**PEOPLE, "dave": ("approver",)}, contacts) == [("bob", "bob@example.com")]
    assert recipients(approval, None, contacts) == []


def test_the_mail_shows_the_preview_and_the_agents_reason_apart_with_both_links(make_pending):
    approval = dataclasses.replace(make_pending("submit_order"), agent_reason="the customer <b>asked</b>")
    message = approval_email(approval, to="bob@example.com", sender="erpilot@example.com",
                             approve_url="https://e.example/a", reject_url="https://e.example/r")
    text = message.get_body(("plain",)).get_content()
    html = message.get_body(("html",)).get_content()
    assert "The ledger's preview:" in text and "Approve: https://e.example/a" in text
    assert "Reject: https://e.example/r" in text
    assert "The agent says" in text and "the customer <b>asked</b>" in text
    assert "the customer &lt;b&gt;asked&lt;/b&gt;" in html and "<b>asked" not in html  # escaped, never markup
    assert '<a href="https://e.example/a">Approve</a>' in html
