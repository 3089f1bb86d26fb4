"""The ERP's handlers on the in-memory ledger: a draft created under one person's assertion is theirs. Another person
with a valid gateway assertion for the SAME session (what a compromised agent holds after that person posted to the
session) can neither read, edit nor submit it, nor read, cancel or refund the order made from it: each gets the
``not_found`` of an id that does not exist, and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest

from erpilot_contracts import subjects
from erpilot_platform.refusals import Refused

pytestmark = pytest.mark.unit

MALLORY = "mallory"


def as_mallory(desk) -> dict[str, Any]:
    """What makes a command Mallory's: her name and a valid assertion for her in the owner's session ``S-1``."""
    return {"requested_by": MALLORY, "assertion": desk.assertion(sub=MALLORY)}


async def read(desk, tool: str, arguments: dict[str, Any], **changes: Any):
    return await desk.reads.run(desk.draft_cmd(tool, arguments, **changes))


async def test_another_person_in_the_same_session_cannot_edit_read_or_submit_the_draft(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    draft_id = draft["draft_id"]

    edited = await desk.drafts.handle(desk.draft_cmd(
        "set_draft_note", {"draft_id": draft_id, "base_revision": 1, "note": "mallory's now"}, **as_mallory(desk)))
    assert (edited.outcome, edited.error.code) == ("business_rejected", "not_found")
    assert list(desk.state.drafts[draft_id].revisions) == [1]

    found = await read(desk, "get_draft", {"draft_id": draft_id}, **as_mallory(desk))
    unknown = await read(desk, "get_draft", {"draft_id": "D-404"}, **as_mallory(desk))
    assert (found.outcome, found.error.code, found.result) == ("business_rejected", "not_found", None)
    assert found.error.message == unknown.error.message.replace("D-404", draft_id)  # as a draft that does not exist
    assert (await read(desk, "get_order_task", {}, **as_mallory(desk))).result == {"status": "none"}

    with pytest.raises(Refused) as refused:
        await desk.operations.prepare(desk.prepare_cmd("submit_order", {"draft_id": draft_id, "revision": 1},
                                                       **as_mallory(desk)))
    assert (refused.value.code, refused.value.status) == ("not_found", 404)
    assert desk.state.operations == {} and desk.ledger.sent_on(subjects.APPROVAL_CMD_REQUEST) == []

    # the owner, in the same session, still does all of it
    assert (await read(desk, "get_draft", {"draft_id": draft_id})).outcome == "succeeded"
    assert (await read(desk, "get_order_task", {})).result["status"] == "ok"
    await desk.prepared("submit_order", {"draft_id": draft_id, "revision": 1})
    assert desk.state.drafts[draft_id].owner == desk.requester


async def test_the_order_made_from_the_draft_is_the_draft_owners(desk):
    draft = await desk.new_draft([("SKU-A", 2)])
    cmd = await desk.prepared("submit_order", {"draft_id": draft["draft_id"], "revision": 1})
    order_id = (await desk.commit(cmd)).result["order_id"]

    found = await read(desk, "get_order", {"order_id": order_id}, **as_mallory(desk))
    assert (found.outcome, found.error.code) == ("business_rejected", "not_found")
    assert (await read(desk, "get_order", {"order_id": order_id})).result["order_id"] == order_id
    operations = dict(desk.state.operations)
    for tool, arguments in (("cancel_order", {"order_id": order_id}),
                            ("refund_payment", {"order_id": order_id, "amount_minor": 100, "currency": "EUR",
                                                "channel": "original"})):
        with pytest.raises(Refused) as refused:
            await desk.operations.prepare(desk.prepare_cmd(tool, arguments, **as_mallory(desk)))
        assert (refused.value.code, refused.value.status) == ("not_found", 404)
    assert desk.state.operations == operations
    assert desk.state.orders[order_id].owner == desk.requester
