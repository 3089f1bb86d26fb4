"""A draft is its creator's, an order its draft's owner's (``domain.owners``): another person in the same session,
or anyone for a draft without an owner, gets the ``not_found`` of an id that does not exist; an order no session
made is the back office's, which every requester may use."""

from __future__ import annotations

from dataclasses import replace

import pytest

from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.owners import is_owner, may_use_draft, may_use_order, owned_draft, owned_order
from erpilot_erp.domain.plans import NewOrder
from erpilot_erp.domain.reads import get_order_task

pytestmark = pytest.mark.unit

MALLORY = "mallory"


def rejected(code: str):
    return pytest.raises(BusinessError, match=rf"^{code}: ")


def test_only_a_named_owner_owns():
    assert is_owner("alice", "alice")
    assert not is_owner("alice", "mallory")
    assert not is_owner(None, "alice") and not is_owner(None, None) and not is_owner("alice", None)


def test_a_draft_is_used_by_its_owner_in_its_session_only(catalog):
    draft = catalog.create(owner="alice")

    assert owned_draft(draft, session_id="S-1", requested_by="alice", draft_id="D-1") is draft
    assert not may_use_draft(draft, session_id="S-1", requested_by=MALLORY)
    assert not may_use_draft(draft, session_id="S-2", requested_by="alice")
    assert not may_use_draft(replace(draft, owner=None), session_id="S-1", requested_by="alice")  # nobody's
    for requester, session in ((MALLORY, "S-1"), ("alice", "S-2")):
        with rejected("not_found") as refused:
            owned_draft(draft, session_id=session, requested_by=requester, draft_id="D-1")
        assert refused.value.details == {"kind": "draft", "id": "D-1"}  # as for a draft that does not exist
    with rejected("not_found"):
        owned_draft(None, session_id="S-1", requested_by="alice", draft_id="D-1")


def test_an_order_is_its_owners_and_one_no_session_made_is_the_back_offices(catalog):
    back_office = catalog.order()
    mine = catalog.order(session_id="S-1", owner="alice", draft_id="D-1", revision=1)
    older = catalog.order(session_id="S-1", owner=None, draft_id="D-1", revision=1)  # before owners were recorded

    assert may_use_order(back_office, MALLORY) and may_use_order(mine, "alice")
    assert not may_use_order(mine, MALLORY) and not may_use_order(older, "alice")
    assert owned_order(mine, requested_by="alice", order_id="O-1") is mine
    for order in (mine, older, None):
        with rejected("not_found"):
            owned_order(order, requested_by=MALLORY, order_id="O-1")


def test_a_new_draft_is_its_creators_and_every_revision_keeps_the_owner(catalog):
    first = catalog.create(owner="alice")
    second = catalog.edit("set_draft_note", first, requested_by="alice", note="dock 3")

    assert (first.owner, second.owner) == ("alice", "alice")
    assert "owner" not in second.to_result()  # the model never sees who owns a draft


@pytest.mark.parametrize(("tool", "arguments"), [
    ("set_draft_note", {"note": "mine now"}),
    ("update_draft_line", {"item_number": 1, "expected_sku": "SKU-A", "qty": 9}),
    ("add_draft_line", {"sku": "SKU-B", "qty": 1}),
    ("remove_draft_line", {"item_number": 1, "expected_sku": "SKU-A"}),
])
def test_another_person_in_the_same_session_cannot_edit_the_draft(catalog, tool, arguments):
    draft = catalog.create(owner="alice")
    with rejected("not_found"):
        catalog.edit(tool, draft, requested_by=MALLORY, **arguments)
    with rejected("not_found"):  # nor anyone a draft that has no owner
        catalog.edit(tool, replace(draft, owner=None), requested_by="alice", **arguments)


def test_the_order_task_shows_only_the_requesters_own_open_drafts(catalog):
    mine = catalog.create(draft_id="D-1", owner="alice")
    theirs = catalog.create(draft_id="D-2", owner="bob")

    assert get_order_task([mine, theirs], "S-1", "alice") == {"status": "ok", "draft": mine.to_result()}
    assert get_order_task([mine, theirs], "S-1", MALLORY) == {"status": "none"}


def test_only_the_owner_prepares_the_submit_of_a_draft_and_the_order_inherits_the_owner(catalog):
    draft = catalog.create(owner="alice")
    arguments = {"draft_id": "D-1", "revision": 1}
    for requester in (MALLORY, None):
        with rejected("not_found"):
            catalog.prepare("submit_order", arguments, catalog.state(latest=draft, requested_by=requester),
                            catalog.now)

    prepared = catalog.prepare("submit_order", arguments, catalog.state(latest=draft, requested_by="alice"),
                               catalog.now)
    plan = catalog.commit("submit_order", arguments, catalog.stored(prepared.facts),
                          catalog.state(latest=draft, requested_by="alice"), catalog.now, new_id="O-100")
    [placed] = plan.of(NewOrder)
    assert (placed.order.owner, placed.order.session_id) == ("alice", "S-1")
    assert "owner" not in plan.result and "session_id" not in plan.result


@pytest.mark.parametrize(("tool", "arguments"), [
    ("cancel_order", {"order_id": "O-1"}),
    ("refund_payment", {"order_id": "O-1", "amount_minor": 100, "currency": "EUR", "channel": "original"}),
])
def test_only_the_owner_prepares_a_cancel_or_refund_of_an_order_and_anyone_of_a_back_office_order(
        catalog, tool, arguments):
    mine = catalog.order(session_id="S-1", owner="alice", draft_id="D-1", revision=1)
    with rejected("not_found"):
        catalog.prepare(tool, arguments, catalog.state(order=mine, requested_by=MALLORY), catalog.now)

    assert catalog.prepare(tool, arguments, catalog.state(order=mine, requested_by="alice"), catalog.now)
    assert catalog.prepare(tool, arguments, catalog.state(order=catalog.order(), requested_by=MALLORY), catalog.now)
