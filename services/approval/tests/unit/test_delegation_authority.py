"""A delegation outlives nothing of its giver's authority (SPEC §11, issue #32): an admin revokes anyone's; a
delegate decides only with the roles the giver still holds now per the people directory (the policy's
``[people]`` and ``ERPILOT_ROLE_SOURCE``); ``until`` is at most 90 days ahead."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta

import pytest

from erpilot_approval.adapters.role_source import RoleSourceFile
from erpilot_approval.domain.people import directory, load_role_source
from erpilot_approval.domain.policy import load_policy
from erpilot_approval.domain.policy_values import PolicyError
from erpilot_contracts.approval.v1 import Actor

from ..fakes import NOW
from .conftest import Desk, refusal_of
from .test_delegations import ANA, give, listed_for, revoke, seen_by

pytestmark = pytest.mark.unit

ADMIN = Actor(sub="root", roles=["admin"])


def with_people(desk: Desk, people: dict[str, tuple[str, ...]] | None) -> Desk:
    desk.ports = replace(desk.ports, people=lambda: people)
    return desk


@pytest.fixture
def desk() -> Desk:
    return Desk(load_policy(None))


async def test_an_admin_revokes_anyones_delegation_and_it_decides_nothing_more(desk):
    record = await desk.request("adjust_stock", requested_by="rita")  # managers only
    await give(desk)

    revoked = await revoke(desk, "dlg_1", ADMIN)

    assert revoked.revoked_at == NOW
    refused = await refusal_of(desk.decide(record, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("forbidden", 403)
    assert await listed_for(desk, ANA) == []
    row = desk.state.audit[-1]
    assert (row.kind, row.actor, row.data["from"]) == ("delegation_revoked", "root", "bob")  # who revoked it


async def test_a_giver_who_no_longer_holds_the_role_lends_nothing(desk):
    record = await desk.request("adjust_stock", requested_by="rita")
    await give(desk)  # bob was a manager then
    with_people(desk, {"bob": ("requester",)})  # ... and is a requester now

    refused = await refusal_of(desk.decide(record, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("forbidden", 403)
    assert await listed_for(desk, ANA) == []
    assert (await refusal_of(seen_by(desk, ANA, record))).code == "not_found"
    assert desk.approval(record["pending_id"]).status == "pending"


async def test_a_giver_the_directory_does_not_name_lends_nothing(desk):
    record = await desk.request("adjust_stock", requested_by="rita")
    await give(desk)
    with_people(desk, {"someone_else": ("manager",)})

    refused = await refusal_of(desk.decide(record, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("forbidden", 403)


async def test_a_delegation_lends_only_the_recorded_roles_the_giver_still_holds(desk):
    stock = await desk.request("adjust_stock", requested_by="rita")  # manager only
    order = await desk.request("cancel_order", requested_by="rita")  # approver only
    await give(desk, Actor(sub="bob", roles=["approver", "manager"]))
    with_people(desk, {"bob": ("approver", "admin")})  # no longer a manager; admin is never lent

    assert await listed_for(desk, ANA) == [order["pending_id"]]
    refused = await refusal_of(desk.decide(stock, "approve", "ana", "requester"))
    assert (refused.code, refused.status) == ("forbidden", 403)
    decided = await desk.decide(order, "approve", "ana", "requester")
    assert (decided.status, decided.decided_on_behalf_of, decided.votes[0].role) == ("approved", "bob", "approver")


async def test_a_giver_who_still_holds_the_role_lends_it(desk):
    record = await desk.request("adjust_stock", requested_by="rita")
    await give(desk)
    with_people(desk, {"bob": ("manager",)})

    assert (await desk.decide(record, "approve", "ana", "requester")).decided_on_behalf_of == "bob"


@pytest.mark.parametrize(("days", "answer"), [(90, "given"), (91, "delegation_too_long")])
async def test_until_is_at_most_90_days_ahead(desk, days, answer):
    outcome = give(desk, until=NOW + timedelta(days=days))

    if answer == "given":
        assert (await outcome).until == NOW + timedelta(days=days)
    else:
        refused = await refusal_of(outcome)
        assert (refused.code, refused.status, refused.message) == (answer, 422, "until is at most 90 days ahead")


# --- the directory ---------------------------------------------------------------------------------------------
def test_the_role_source_overrides_the_policys_people_person_by_person():
    policy = load_policy('[people.bob]\nroles = ["manager"]\n[people.cy]\nroles = ["approver"]\n')
    source = load_role_source('[people.bob]\nroles = []\n')

    assert directory(policy.people, source) == {"bob": (), "cy": ("approver",)}
    assert directory(policy.people, None) == {"bob": ("manager",), "cy": ("approver",)}
    assert directory(None, None) is None  # neither configured: the recorded roles stand (delegation.answerable)
    assert load_policy(None).people is None


@pytest.mark.parametrize(("text", "message"), [
    ('[people.bob]\nroles = ["boss"]\n', "people.bob.roles[0]: unknown role 'boss'"),
    ('[people.bob]\nrole = ["manager"]\n', "people.bob.role: unknown key"),
    ("[people.bob]\n", "people.bob.roles: missing"),
    ('[staff.bob]\nroles = ["manager"]\n', "staff: unknown key"),
])
def test_a_malformed_role_source_names_the_key(text, message):
    with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_role_source(text)


def test_the_role_source_file_is_read_again_when_it_changes_and_names_nobody_while_broken(tmp_path):
    path = tmp_path / "roles.toml"
    path.write_text('[people.bob]\nroles = ["manager"]\n')
    source = RoleSourceFile(path)
    assert source() == {"bob": ("manager",)}

    path.write_text('[people.bob]\nroles = ["requester"]\n')
    os.utime(path, ns=(1, 1))  # a new modification time, whatever the clock's resolution
    assert source() == {"bob": ("requester",)}

    path.write_text("[people.bob\n")  # broken while running: fails closed
    assert source() == {}
    path.unlink()
    assert source() == {}
    path.write_text('[people.bob]\nroles = ["approver"]\n')
    assert source() == {"bob": ("approver",)}
