"""A draft is the person's who created it, over NATS and PostgreSQL: with a valid gateway assertion for another
person in the SAME session (what a compromised agent holds once that person posted to the session), the ERP refuses
to edit, read or submit the draft, and to read, cancel or refund the order made from it, exactly as for an id that
does not exist, and stores nothing. The views the gateway reads carry the owner."""

from __future__ import annotations

from typing import Any

import pytest

from erpilot_contracts import subjects

from .conftest import REQUESTER, assertion

pytestmark = pytest.mark.integration

MALLORY = "mallory"


def mallory(cmd: Any) -> Any:
    """``cmd`` sent for Mallory, vouched for by a valid assertion for her in the same session."""
    return cmd.model_copy(update={"requested_by": MALLORY, "assertion": assertion(cmd.session_id, sub=MALLORY)})


async def read(erp, tool: str, arguments: dict, session_id: str, *, as_mallory: bool = False):
    cmd = erp.read_cmd(tool, arguments, session_id=session_id)
    return await erp.send(subjects.ERP_QUERY_READ, mallory(cmd) if as_mallory else cmd, durable=False)


async def test_another_person_in_the_same_session_cannot_edit_read_or_submit_a_draft(erp, session_id):
    sku = await erp.make_product(on_hand=10)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 1)])
    draft_id = draft["draft_id"]

    edit = erp.draft_cmd("set_draft_note", {"draft_id": draft_id, "base_revision": 1, "note": "mallory's"},
                         session_id=session_id)
    edited = await erp.send(subjects.ERP_REQ_DRAFT, mallory(edit))
    assert (edited.data["outcome"], edited.data["error"]["code"]) == ("business_rejected", "not_found")
    assert await erp.revisions_of(draft_id) == 1

    found = await read(erp, "get_draft", {"draft_id": draft_id}, session_id, as_mallory=True)
    unknown = await read(erp, "get_draft", {"draft_id": "D-99999999"}, session_id, as_mallory=True)
    assert found.data["error"] == {**unknown.data["error"],
                                   "message": unknown.data["error"]["message"].replace("D-99999999", draft_id),
                                   "details": found.data["error"].get("details")}
    assert (found.data["outcome"], found.data["error"]["code"]) == ("business_rejected", "not_found")
    task = await read(erp, "get_order_task", {}, session_id, as_mallory=True)
    assert task.data["result"] == {"status": "none"}

    submit = mallory(erp.prepare_cmd("submit_order", {"draft_id": draft_id, "revision": 1}, session_id=session_id))
    refused = await erp.send(subjects.ERP_CMD_PREPARE, submit)
    assert (refused.ok, refused.error.code, refused.error.status) == (False, "not_found", 404)
    assert await erp.operation_row(submit.operation_id) is None
    assert await erp.approval_requests(submit.operation_id) == []

    # the owner still reads and submits it; the ERP records them as its owner, and the order is theirs too
    view = (await erp.view("draft", id=draft_id)).data
    assert (view["owner"], view["session_id"]) == (REQUESTER, session_id)
    assert (await read(erp, "get_draft", {"draft_id": draft_id}, session_id)).data["outcome"] == "succeeded"
    cmd = await erp.prepare("submit_order", {"draft_id": draft_id, "revision": 1}, session_id=session_id)
    order = (await erp.approve_and_commit(cmd)).data["result"]
    assert "owner" not in order and "session_id" not in order  # what the agent's tool gets
    order_view = (await erp.view("order", id=order["order_id"])).data
    assert (order_view["owner"], order_view["session_id"]) == (REQUESTER, session_id)

    seen = await read(erp, "get_order", {"order_id": order["order_id"]}, session_id, as_mallory=True)
    assert seen.data["error"]["code"] == "not_found"
    cancel = mallory(erp.prepare_cmd("cancel_order", {"order_id": order["order_id"]}, session_id=session_id))
    refused = await erp.send(subjects.ERP_CMD_PREPARE, cancel)
    assert (refused.ok, refused.error.code) == (False, "not_found")
    assert await erp.operation_row(cancel.operation_id) is None
